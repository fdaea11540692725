/* wire_vectors.h - the shared test vectors of the wire protocol, from the
 * C side: every message's sample frames (wire_sample, as the fuzz corpus)
 * with their decoded fields as JSON, and the decoder that checks frames
 * another implementation wrote (the Python client, clients/python).
 *
 * JSON of a frame: {"type": "PUSH", "req": 1, "fields": {...}}, a field per
 * entry of its wire_msgs.h list (EMPTY ones left out):
 *   numbers, ROLE, ENUM   integers (a U64 past 2^63 as a decimal string)
 *   F64, POS              numbers (17 significant digits: exact)
 *   FLAG                  true / false
 *   RAW, BYTES            lowercase hex strings
 *   STR                   a string ({"hex": ...} when not UTF-8)
 *   SHAPE                 [dims]
 *   TENSOR                {"shape": [dims], "data": [floats]}
 *   OPTIM                 the field's bytes as hex (its own layout, wire.c)
 *   ITEMS                 a list of objects
 */
#ifndef DROVER_TEST_WIRE_VECTORS_H
#define DROVER_TEST_WIRE_VECTORS_H

#include <stddef.h>
#include <stdint.h>

/* The unit test binary's `--wire-vectors` mode (argv after it):
 *   write DIR       DIR/NAME-V.bin (the frame) and DIR/NAME-V.json for
 *                   every message NAME and sample variant V
 *   decode FILE...  per file one line of JSON on stdout: the frame's JSON
 *                   plus "same": whether re-encoding the decoded message
 *                   gives the file's bytes back, or {"file", "error"}
 * Returns the process's exit status (0, or 1 when a file failed). */
int wire_vectors_main(int argc, char **argv);

/* The JSON text of the frame in buf[len] (malloc'ed, caller frees) and
 * whether its re-encoding is byte-identical; NULL with err_msg() set
 * when the frame does not decode. */
char *wire_vectors_json(const uint8_t *buf, size_t len, int *same);

#endif
