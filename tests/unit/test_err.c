/* test_err.c - error codes and the thread's message. */
#include "base/err.h"
#include "harness.h"

TEST(err_message_may_wrap_the_previous_one) {
  err_set(DRV_EIO, "connection refused by %s", "host 'b'");
  /* The usual wrapping: the old message is an argument of the new one. */
  CHECK_INT_EQ(err_set(DRV_ENODE, "launching worker:1: %s", err_msg()), DRV_ENODE);
  CHECK_STR_CONTAINS(err_msg(), "launching worker:1: connection refused by host 'b'");
  err_set(DRV_EIO, "%s; again: %s", err_msg(), err_msg());
  CHECK_STR_CONTAINS(err_msg(), "launching worker:1: connection refused by host 'b'; again: "
                                   "launching worker:1: connection refused by host 'b'");
}

TEST(err_names_and_texts) {
  CHECK_STR_CONTAINS(err_name(DRV_ECLOSURE), "DRV_ECLOSURE");
  CHECK_STR_CONTAINS(err_str(DRV_ECANCELLED), "cancelled");
}
