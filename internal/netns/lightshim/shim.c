//go:build cgo && linux

// A run's network shim in C, done by a constructor before the Go runtime
// starts (see doc.go). This is netns.RunShim, the same contract in the
// same steps: netns's shim tests run both, and TestShimConstants checks
// that the constants below are netns's.

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

// These must be netns's ShimArg, socketFlag, proxyPort, shimFailed and
// maxSocketPath (TestShimConstants reads them from here).
#define SHIM_ARG "__agentgate_netshim"
#define SOCKET_FLAG "-socket="
#define PROXY_PORT 3128
#define SHIM_FAILED 125
#define MAX_SOCKET_PATH 107

extern char **environ;

// fail writes the shim's one line to stderr, which is the run's, and
// returns the exit code for a shim that could not start its command.
static int fail(const char *what, const char *detail, int err) {
	char line[1024];
	int n = snprintf(line, sizeof line, "agentgate netshim: %s%s%s%s\n", what, detail ? detail : "",
	                 err ? ": " : "", err ? strerror(err) : "");
	if (n > (int)sizeof line - 1) {
		n = (int)sizeof line - 1;
		line[n - 1] = '\n';
	}
	ssize_t w = write(2, line, (size_t)n);
	(void)w;
	return SHIM_FAILED;
}

// listen_proxy returns a TCP socket listening on 127.0.0.1:PROXY_PORT in
// the namespace the shim runs in, or -1 with errno set.
static int listen_proxy(void) {
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(PROXY_PORT)};
	addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(fd, (struct sockaddr *)&addr, sizeof addr) < 0 || listen(fd, SOMAXCONN) < 0) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

// socket_name fills addr for the socket at path: path itself when it fits
// in sun_path, else the same file through a descriptor of its directory
// (/proc/self/fd/N/name), which *dirfd holds until the caller closes it,
// as netns's socketAddr does. It returns 0, or an errno (ENAMETOOLONG when
// even the short name is too long).
static int socket_name(const char *path, struct sockaddr_un *addr, int *dirfd) {
	*dirfd = -1;
	addr->sun_family = AF_UNIX;
	if (strlen(path) <= MAX_SOCKET_PATH) {
		strcpy(addr->sun_path, path);
		return 0;
	}
	char *dir_copy = strdup(path), *base_copy = strdup(path);
	int err = 0;
	if (!dir_copy || !base_copy) {
		err = ENOMEM;
		goto out;
	}
	*dirfd = open(dirname(dir_copy), O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (*dirfd < 0) {
		err = errno;
		goto out;
	}
	int n = snprintf(addr->sun_path, sizeof addr->sun_path, "/proc/self/fd/%d/%s", *dirfd, basename(base_copy));
	if (n < 0 || n > MAX_SOCKET_PATH)
		err = ENAMETOOLONG;
out:
	free(dir_copy);
	free(base_copy);
	return err;
}

// hand_over makes the listener and sends it to the gateway's socket at
// path. It closes every descriptor it opened, so the command holds none:
// the gateway's copy keeps the listener open. It returns 0, or the step
// that failed with errno set.
static const char *hand_over(const char *path) {
	const char *failed = NULL;
	int ln = -1, conn = -1, dirfd = -1;
	struct sockaddr_un addr = {0};
	if ((ln = listen_proxy()) < 0) {
		failed = "listen on 127.0.0.1:3128";
	} else if ((conn = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0) {
		failed = "unix socket";
	} else if ((errno = socket_name(path, &addr, &dirfd)) != 0) {
		failed = "the gateway's socket";
	} else if (connect(conn, (struct sockaddr *)&addr, sizeof addr) < 0) {
		failed = "connect to the gateway";
	} else {
		char byte = 'L';
		struct iovec iov = {.iov_base = &byte, .iov_len = 1};
		union {
			char buf[CMSG_SPACE(sizeof(int))];
			struct cmsghdr align;
		} control;
		memset(&control, 0, sizeof control);
		struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf, .msg_controllen = sizeof control.buf};
		struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &ln, sizeof(int));
		ssize_t sent;
		do
			sent = sendmsg(conn, &msg, MSG_NOSIGNAL);
		while (sent < 0 && errno == EINTR);
		if (sent < 0)
			failed = "send the listener to the gateway";
	}
	int e = errno;
	if (ln >= 0)
		close(ln);
	if (conn >= 0)
		close(conn);
	if (dirfd >= 0)
		close(dirfd);
	errno = e;
	return failed;
}

// shim is netns.RunShim given the arguments after SHIM_ARG: -socket=PATH
// -- ARGV..., ARGV's first word an absolute path. It returns only on
// failure.
static int shim(int argc, char **argv) {
	size_t flag = strlen(SOCKET_FLAG);
	if (argc < 3 || strncmp(argv[0], SOCKET_FLAG, flag) != 0 || strcmp(argv[1], "--") != 0)
		return fail("usage: " SHIM_ARG " -socket=PATH -- ARGV...", NULL, 0);
	const char *path = argv[0] + flag;
	char **cmd = argv + 2;
	if (*path == 0)
		return fail("no -socket path", NULL, 0);
	if (cmd[0][0] != '/')
		return fail("the command is not an absolute path: ", cmd[0], 0);
	const char *failed = hand_over(path);
	if (failed)
		return fail(failed, NULL, errno);
	execve(cmd[0], cmd, environ);
	return fail("exec ", cmd[0], errno);
}

// shim_before_go runs before the Go runtime: given the shim's argument it
// hands over the listener and execs the command, or exits on failure;
// otherwise it returns and main runs. Only glibc hands a constructor the
// program's arguments; with another C library there is no constructor, and
// main runs the shim in Go.
#ifdef __GLIBC__
__attribute__((constructor)) static void shim_before_go(int argc, char **argv, char **envp) {
	(void)envp;
	if (argc > 1 && strcmp(argv[1], SHIM_ARG) == 0)
		_exit(shim(argc - 2, argv + 2));
}
#endif
