# test_feed_keys.sh - keyed external feeders (FEED_OPEN.key; what
# drover_client.spark.feed's retried tasks rely on) against a real 1 ps + 2
# worker cluster, from Python without Spark: a feeder lost mid-way and its
# retry, a live feeder taken over by a newer one of its key, a retry of a
# key fed whole, a feeder that leaves once its batches are taken, the
# holder that sent none; the fit trains every batch once (20 = 10 + 6 + 4).
. tests/cli/lib.sh
python_client feed-keys
feed_fit_start keys
timeout 120 "$PY" tests/cli/feed_keys.py "$RUN"
check "feed-keys-t05 the fit ended" wait_for 60 sh -c "! kill -0 $trainer 2>/dev/null"
wait $trainer
check "feed-keys-t05 the script exited 0" test $? -eq 0
check "feed-keys-t05 each batch trained once: 20 fed, 20 trained" grep -q "^FED 20 TRAINED 20$" "$TMP/keys.out"
check "feed-keys-t02 events.log says who took over a gone feeder's key" \
  grep -q "feeder b takes over key k1 from a (gone): 5 batches taken already" "$RUN/events.log"
check "feed-keys-t03 and a connected one's" \
  grep -q "feeder e takes over key k2 from c (still connected: closed): 3 batches taken already" "$RUN/events.log"
