/* test_err.c - error codes and the thread's message. */
#include "base/err.h"
#include "harness.h"

TEST(err_message_may_wrap_the_previous_one) {
  drv_error(DRV_EIO, "connection refused by %s", "host 'b'");
  /* The usual wrapping: the old message is an argument of the new one. */
  CHECK_INT_EQ(drv_error(DRV_ENODE, "launching worker:1: %s", drv_errmsg()), DRV_ENODE);
  CHECK_STR_CONTAINS(drv_errmsg(), "launching worker:1: connection refused by host 'b'");
  drv_error(DRV_EIO, "%s; again: %s", drv_errmsg(), drv_errmsg());
  CHECK_STR_CONTAINS(drv_errmsg(), "launching worker:1: connection refused by host 'b'; again: "
                                   "launching worker:1: connection refused by host 'b'");
}

TEST(err_names_and_texts) {
  CHECK_STR_CONTAINS(drv_err_name(DRV_ECLOSURE), "DRV_ECLOSURE");
  CHECK_STR_CONTAINS(drv_strerror(DRV_ECANCELLED), "cancelled");
}
