/* test_util.c - the descriptor reserve: with the table full, util_open
 * still opens (the reserve released, then taken back). */
#include <errno.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "base/util.h"

/* In a child, so that the low limit and the filled table stay there. Exit
 * codes: 0 ok, else the step that went wrong. */
static int reserve_child(void) {
  struct rlimit rl = {64, 64};
  if (setrlimit(RLIMIT_NOFILE, &rl) < 0) return 10;
  if (util_fd_reserve() != UTIL_FD_RESERVE) return 11;
  while (open("/dev/null", O_RDONLY) >= 0) {
  }
  if (errno != EMFILE) return 12;
  if (open("/dev/null", O_RDONLY | O_CLOEXEC) >= 0) return 13; /* full indeed */
  int fd = util_open("/dev/null", O_RDONLY, 0);
  if (fd < 0) return 14;
  /* taken back: all but the one the open used */
  if (util_fd_reserve() != UTIL_FD_RESERVE - 1) return 15;
  close(fd);
  if (util_fd_reserve() != UTIL_FD_RESERVE) return 16; /* the next call tops it up */
  util_fd_release();
  if (open("/dev/null", O_RDONLY) < 0) return 17; /* released: free for anyone */
  return 0;
}

TEST(util_open_uses_the_descriptor_reserve_when_the_table_is_full) {
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) _exit(reserve_child());
  int st = 0;
  CHECK_INT_EQ((int)waitpid(pid, &st, 0), (int)pid);
  CHECK(WIFEXITED(st));
  CHECK_INT_EQ(WEXITSTATUS(st), 0);
}
