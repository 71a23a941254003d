//go:build cgo && linux

// A run's reaper in C, done by a constructor before the Go runtime starts
// (see doc.go): one reaper runs per run, and the Go runtime's start (its
// threads, its signal handling, its heap) was most of what each cost, in
// time and in memory. This is proctree.Reap, the same contract in the same
// steps; proctree's reaper tests run both (TestLightReaper and those after
// it), and TestReaperConstants checks that the constants below are
// proctree's.
//
// Everything here is single-threaded and allocates little: the signals the
// reaper acts on are blocked and taken with sigwaitinfo, so no handler
// ever runs.

#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

// These must be proctree's ReaperArg, parentFlag, niceFlag, MaxNice,
// CookieVar, DeathSignal, stopTries and reaperGiveUp (TestReaperConstants
// reads them from here).
#define REAPER_ARG "__agentgate_reaper"
#define PARENT_FLAG "-gateway="
#define NICE_FLAG "-nice="
#define MAX_NICE 19
#define COOKIE_VAR "AGENTGATE_RUN"
#define DEATH_SIGNAL SIGUSR1
#define STOP_TRIES 5
#define GIVE_UP_SECONDS 60

extern char **environ;

// say writes one line to the reaper's stderr, which is the run's: the
// supervisor keeps its tail for the run's error.
static void say(const char *what, const char *detail) {
	char line[512];
	int n = snprintf(line, sizeof line, "agentgate reaper: %s%s\n", what, detail ? detail : "");
	if (n > (int)sizeof line - 1)
		n = (int)sizeof line - 1;
	ssize_t w = write(2, line, (size_t)n);
	(void)w;
}

// slurp reads a whole file into a NUL-terminated buffer of its own, which
// the caller frees; NULL when it cannot be read.
static char *slurp(const char *path, size_t *len) {
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	size_t cap = 4096, n = 0;
	char *buf = malloc(cap);
	while (buf) {
		if (n + 1 >= cap) {
			char *bigger = realloc(buf, cap * 2);
			if (!bigger) {
				free(buf);
				buf = NULL;
				break;
			}
			buf = bigger;
			cap *= 2;
		}
		ssize_t r = read(fd, buf + n, cap - n - 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			free(buf);
			buf = NULL;
			break;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	if (buf) {
		buf[n] = 0;
		if (len)
			*len = n;
	}
	return buf;
}

// cgroup_path finds the cgroup v2 path in a /proc/PID/cgroup file, its
// "0::PATH" line, as proctree's parseCgroupFile does; the caller frees it.
static char *cgroup_path(const char *file) {
	char *b = slurp(file, NULL);
	if (!b)
		return NULL;
	char *out = NULL;
	for (char *line = b, *next; line && *line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = 0;
		if (strncmp(line, "0::/", 4) != 0)
			continue;
		const char *p = line + 3;
		size_t n = strlen(p);
		if (strstr(p, "/../") || (n >= 3 && strcmp(p + n - 3, "/..") == 0))
			continue;
		out = strdup(p);
		break;
	}
	free(b);
	return out;
}

// unescape_mount undoes mountinfo's octal escapes (\040 for a space) in
// place.
static void unescape_mount(char *s) {
	char *w = s;
	for (char *r = s; *r; r++) {
		if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] >= '0' && r[2] <= '7' && r[3] >= '0' && r[3] <= '7') {
			*w++ = (char)((r[1] - '0') * 64 + (r[2] - '0') * 8 + (r[3] - '0'));
			r += 3;
			continue;
		}
		*w++ = *r;
	}
	*w = 0;
}

// cgroup2_mount returns the mount point of the first cgroup2 file system
// in this process's mountinfo; the caller frees it.
static char *cgroup2_mount(void) {
	char *b = slurp("/proc/self/mountinfo", NULL);
	if (!b)
		return NULL;
	char *out = NULL;
	for (char *line = b, *next; line && *line && !out; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = 0;
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER
		char *sep = strstr(line, " - ");
		if (!sep)
			continue;
		*sep = 0;
		char *fstype = sep + 3;
		size_t fl = strcspn(fstype, " ");
		if (fl != 7 || strncmp(fstype, "cgroup2", 7) != 0)
			continue;
		char *field[5];
		int nf = 0;
		for (char *save = NULL, *f = strtok_r(line, " ", &save); f && nf < 5; f = strtok_r(NULL, " ", &save))
			field[nf++] = f;
		if (nf < 5)
			continue;
		unescape_mount(field[4]);
		if (field[4][0] == '/')
			out = strdup(field[4]);
	}
	free(b);
	return out;
}

// own_cgroup returns the directory of this process's cgroup when it is the
// run's own, as proctree's ownCgroup decides: a cgroup v2 named after the
// run's id (the cookie) that the gateway is not in. NULL otherwise: the
// reaper then scans /proc.
static char *own_cgroup(pid_t gateway) {
	const char *id = getenv(COOKIE_VAR);
	if (!id || !*id)
		return NULL;
	char *mine = cgroup_path("/proc/self/cgroup");
	if (!mine)
		return NULL;
	const char *base = strrchr(mine, '/') + 1;
	char *dir = NULL, *theirs = NULL, *mnt = NULL;
	if (strcmp(base, id) != 0)
		goto out;
	char file[64];
	snprintf(file, sizeof file, "/proc/%d/cgroup", (int)gateway);
	theirs = cgroup_path(file);
	if (!theirs || strcmp(theirs, mine) == 0)
		goto out;
	mnt = cgroup2_mount();
	if (!mnt)
		goto out;
	size_t ml = strlen(mnt);
	while (ml > 1 && mnt[ml - 1] == '/')
		mnt[--ml] = 0;
	if (asprintf(&dir, "%s%s", strcmp(mnt, "/") == 0 ? "" : mnt, mine) < 0) {
		dir = NULL;
		goto out;
	}
	char procs[PATH_MAX];
	struct stat st;
	if (snprintf(procs, sizeof procs, "%s/cgroup.procs", dir) >= (int)sizeof procs || stat(procs, &st) != 0) {
		free(dir);
		dir = NULL;
	}
out:
	free(mine);
	free(theirs);
	free(mnt);
	return dir;
}

struct proc {
	pid_t pid, ppid;
	char state;
};

struct procs {
	struct proc *p;
	size_t n, cap;
};

static int procs_add(struct procs *ps, struct proc p) {
	if (ps->n == ps->cap) {
		size_t cap = ps->cap ? 2 * ps->cap : 64;
		struct proc *bigger = realloc(ps->p, cap * sizeof *bigger);
		if (!bigger)
			return -1;
		ps->p = bigger;
		ps->cap = cap;
	}
	ps->p[ps->n++] = p;
	return 0;
}

// read_stat reads the state and parent of process pid from /proc. The
// command name is in parentheses and may hold spaces and parentheses
// itself, so the fields are taken after the last ')'.
static int read_stat(pid_t pid, struct proc *out) {
	char path[64], buf[1024];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n;
	do
		n = read(fd, buf, sizeof buf - 1);
	while (n < 0 && errno == EINTR);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	char *rp = strrchr(buf, ')');
	if (!rp || rp[1] != ' ' || !rp[2])
		return -1;
	char state;
	int ppid;
	if (sscanf(rp + 2, "%c %d", &state, &ppid) != 2)
		return -1;
	*out = (struct proc){.pid = pid, .ppid = ppid, .state = state};
	return 0;
}

// cgroup_victims reads the processes of the cgroup at dir but self.
static int cgroup_victims(const char *dir, pid_t self, struct procs *out) {
	char path[PATH_MAX];
	if (snprintf(path, sizeof path, "%s/cgroup.procs", dir) >= (int)sizeof path)
		return -1;
	char *b = slurp(path, NULL);
	if (!b)
		return -1;
	for (char *s = b, *end; *s; s = end) {
		long pid = strtol(s, &end, 10);
		if (end == s) {
			end = s + 1;
			continue;
		}
		struct proc p;
		if (pid != self && pid > 0 && read_stat((pid_t)pid, &p) == 0 && procs_add(out, p) != 0)
			break;
	}
	free(b);
	return 0;
}

// descendants lists every process below self, zombies included: a zombie
// leader's children stay its own until its last thread exits.
static int descendants(pid_t self, struct procs *out) {
	struct procs all = {0};
	DIR *d = opendir("/proc");
	if (!d)
		return -1;
	for (struct dirent *e; (e = readdir(d));) {
		char *end;
		long pid = strtol(e->d_name, &end, 10);
		struct proc p;
		if (*end || pid <= 0 || read_stat((pid_t)pid, &p) != 0)
			continue;
		if (procs_add(&all, p) != 0)
			break;
	}
	closedir(d);
	// A breadth-first walk: out grows as it is walked. Each process is
	// taken once (its parent is then cleared), so that a snapshot that is
	// not consistent, a pid reused while /proc was read, cannot loop.
	pid_t parent = self;
	for (size_t walked = 0;; walked++) {
		for (size_t i = 0; i < all.n; i++) {
			if (all.p[i].ppid != parent)
				continue;
			all.p[i].ppid = 0;
			if (procs_add(out, all.p[i]) != 0)
				break;
		}
		if (walked >= out->n)
			break;
		parent = out->p[walked].pid;
	}
	free(all.p);
	return 0;
}

// The freezer stops what runs and kills what is stopped, so that a tree
// that forks while it is being killed cannot outrun the rounds (see
// proctree's freezer). It keeps how often it sent each process SIGSTOP.
struct tries {
	pid_t *pid;
	int *n;
	size_t len, cap;
};

static int *tries_of(struct tries *t, pid_t pid) {
	for (size_t i = 0; i < t->len; i++)
		if (t->pid[i] == pid)
			return &t->n[i];
	if (t->len == t->cap) {
		size_t cap = t->cap ? 2 * t->cap : 64;
		pid_t *p = realloc(t->pid, cap * sizeof *p);
		if (!p)
			return NULL;
		t->pid = p;
		int *n = realloc(t->n, cap * sizeof *n);
		if (!n)
			return NULL;
		t->n = n;
		t->cap = cap;
	}
	t->pid[t->len] = pid;
	t->n[t->len] = 0;
	return &t->n[t->len++];
}

static void freeze_round(struct tries *t, const struct procs *victims) {
	for (size_t i = 0; i < victims->n; i++) {
		const struct proc *v = &victims->p[i];
		int stopped = v->state == 'T' || v->state == 't';
		int zombie = v->state == 'Z' || v->state == 'X';
		int *n = tries_of(t, v->pid);
		if (stopped || zombie || !n || *n >= STOP_TRIES) {
			kill(v->pid, SIGKILL);
			continue;
		}
		(*n)++;
		kill(v->pid, SIGSTOP);
	}
}

// reap_children waits for every child that has exited, without blocking,
// and says whether this process has no child left at all.
static int reap_children(void) {
	for (;;) {
		pid_t pid = waitpid(-1, NULL, WNOHANG | __WALL);
		if (pid < 0 && errno == ECHILD)
			return 1;
		if (pid < 0 && errno == EINTR)
			continue;
		if (pid <= 0)
			return 0;
	}
}

static double now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

// any_alive says whether victims holds a process that is not a zombie.
static int any_alive(const struct procs *victims) {
	for (size_t i = 0; i < victims->n; i++)
		if (victims->p[i].state != 'Z' && victims->p[i].state != 'X')
			return 1;
	return 0;
}

// kill_tree kills every descendant of this process, in rounds, and reaps
// its children, as proctree's killTree does: by the run's cgroup's list
// of processes when it has one, and by a scan of /proc when it has none,
// or when that list is empty twice in a row while children remain (a
// privileged process that left the cgroup). It ends when it has no child
// left and, with a cgroup, the cgroup lists no live process: a process of
// the cgroup that is not below it is stopped in one round and killed in a
// later one, which its own children's end must not cut short.
static void kill_tree(const char *cgroup) {
	pid_t self = getpid();
	struct tries t = {0};
	long delay_ns = 1000000;
	double deadline = now() + GIVE_UP_SECONDS;
	int empty_rounds = 0;
	for (;;) {
		int childless = reap_children();
		struct procs victims = {0};
		int scan = cgroup == NULL;
		if (!scan) {
			if (cgroup_victims(cgroup, self, &victims) != 0 || !any_alive(&victims)) {
				if (childless) {
					free(victims.p);
					break;
				}
				empty_rounds++;
				scan = empty_rounds > 1;
			} else {
				empty_rounds = 0;
			}
		} else if (childless) {
			break;
		}
		if (scan && descendants(self, &victims) != 0) {
			free(victims.p);
			break;
		}
		freeze_round(&t, &victims);
		free(victims.p);
		if (now() > deadline)
			break;
		struct timespec ts = {0, delay_ns};
		nanosleep(&ts, NULL);
		delay_ns = delay_ns * 2 > 20000000 ? 20000000 : delay_ns * 2;
	}
	free(t.pid);
	free(t.n);
}

// exec_agent replaces the child with argv[0], found as os/exec finds it: a
// name with a slash as it is, any other in $PATH's directories (but a
// relative one, where os/exec refuses what it finds, and so does this).
// It returns the errno of the failure, and sets *not_found when no file of
// that name could be run (127, as the Go reaper answers; 126 otherwise).
static int exec_agent(char **argv, int *not_found) {
	if (strchr(argv[0], '/')) {
		execve(argv[0], argv, environ);
		*not_found = errno == ENOENT;
		return errno;
	}
	const char *path = getenv("PATH");
	char file[PATH_MAX];
	for (const char *dir = path; dir && *dir;) {
		size_t n = strcspn(dir, ":");
		if (n > 0 && dir[0] == '/' && n + 1 + strlen(argv[0]) < sizeof file) {
			memcpy(file, dir, n);
			file[n] = '/';
			strcpy(file + n + 1, argv[0]);
			execve(file, argv, environ);
			if (errno != ENOENT && errno != ENOTDIR && errno != EACCES) {
				*not_found = 0;
				return errno;
			}
		}
		dir += n;
		if (*dir == ':')
			dir++;
	}
	*not_found = 1;
	return ENOENT;
}

static const int forwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, DEATH_SIGNAL};

static void caught(int sig) { (void)sig; }

static int reap(int argc, char **argv) {
	pid_t gateway = getppid();
	if (argc > 0 && strncmp(argv[0], PARENT_FLAG, strlen(PARENT_FLAG)) == 0) {
		gateway = (pid_t)atoi(argv[0] + strlen(PARENT_FLAG));
		argv++;
		argc--;
	}
	int niceness = 0;
	if (argc > 0 && strncmp(argv[0], NICE_FLAG, strlen(NICE_FLAG)) == 0) {
		niceness = atoi(argv[0] + strlen(NICE_FLAG));
		if (niceness < 0 || niceness > MAX_NICE)
			niceness = 0;
		argv++;
		argc--;
	}
	if (argc == 0)
		return 125;
	if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0) {
		say("PR_SET_CHILD_SUBREAPER: ", strerror(errno));
		return 125;
	}
	// Every signal the reaper acts on is blocked and taken in the loop
	// below. Each gets a handler that never runs, as Go's signal.Notify
	// would install, so that one the gateway left ignored still arrives,
	// and the agent starts with it at its default, not ignored.
	sigset_t set, orig;
	sigemptyset(&set);
	for (size_t i = 0; i < sizeof forwarded / sizeof forwarded[0]; i++)
		sigaddset(&set, forwarded[i]);
	sigaddset(&set, SIGCHLD);
	sigprocmask(SIG_BLOCK, &set, &orig);
	struct sigaction sa = {.sa_handler = caught};
	for (size_t i = 0; i < sizeof forwarded / sizeof forwarded[0]; i++)
		sigaction(forwarded[i], &sa, NULL);
	// A child that exits must be a zombie to wait for, whatever the
	// gateway left SIGCHLD at.
	sa.sa_handler = SIG_DFL;
	sigaction(SIGCHLD, &sa, NULL);
	if (getppid() != gateway) {
		say("the gateway is gone", NULL);
		return 125;
	}
	char *cgroup = own_cgroup(gateway);

	// The child tells of a failed exec through a pipe that a successful
	// one closes, as os/exec does.
	int report[2];
	if (pipe2(report, O_CLOEXEC) != 0) {
		say("pipe: ", strerror(errno));
		return 126;
	}
	pid_t self = getpid();
	pid_t agent = fork();
	if (agent < 0) {
		say("fork: ", strerror(errno));
		return 126;
	}
	if (agent == 0) {
		close(report[0]);
		// Its own process group, and death with its reaper, as the
		// agent would die with the gateway.
		setpgid(0, 0);
		prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
		if (getppid() != self)
			_exit(125);
		// The agent's niceness, which all it starts inherits; the
		// reaper keeps its own, to kill promptly. Raising one's own
		// niceness is never refused.
		if (niceness > 0)
			setpriority(PRIO_PROCESS, 0, niceness);
		sigprocmask(SIG_SETMASK, &orig, NULL);
		int not_found = 0;
		int err[2];
		err[0] = exec_agent(argv, &not_found);
		err[1] = not_found;
		ssize_t n = write(report[1], err, sizeof err);
		(void)n;
		_exit(127);
	}
	close(report[1]);
	setpgid(agent, agent); // either side may be first: both set it
	int err[2];
	ssize_t n;
	do
		n = read(report[0], err, sizeof err);
	while (n < 0 && errno == EINTR);
	close(report[0]);
	if (n == (ssize_t)sizeof err) {
		while (waitpid(agent, NULL, 0) < 0 && errno == EINTR)
			;
		char what[PATH_MAX + 16];
		snprintf(what, sizeof what, "exec %s: ", argv[0]);
		say(what, err[1] && !strchr(argv[0], '/') ? "executable file not found in $PATH" : strerror(err[0]));
		free(cgroup);
		return err[1] ? 127 : 126;
	}

	int status = 0;
	for (int done = 0; !done;) {
		siginfo_t si;
		int sig = sigwaitinfo(&set, &si);
		if (sig < 0)
			continue; // EINTR
		switch (sig) {
		case SIGCHLD:
			// Orphans of the run are this process's children too: reap
			// whichever exited, and note the agent's status.
			for (;;) {
				int st;
				pid_t pid = waitpid(-1, &st, WNOHANG | __WALL);
				if (pid < 0 && errno == EINTR)
					continue;
				if (pid <= 0)
					break;
				if (pid == agent) {
					status = st;
					done = 1;
					break;
				}
			}
			break;
		case DEATH_SIGNAL:
			if (getppid() != gateway) {
				// The gateway died: everything below goes once the
				// agent's exit is seen; the agent first, so that it
				// stops starting more.
				kill(-agent, SIGKILL);
				kill(agent, SIGKILL);
			}
			break;
		case SIGTERM:
			kill(-agent, SIGTERM);
			break;
		default:
			kill(agent, sig);
		}
	}
	kill_tree(cgroup);
	free(cgroup);
	if (WIFSIGNALED(status)) {
		// Die of the same signal, so that the supervisor sees what the
		// agent met.
		int sig = WTERMSIG(status);
		signal(sig, SIG_DFL);
		sigset_t one;
		sigemptyset(&one);
		sigaddset(&one, sig);
		sigprocmask(SIG_UNBLOCK, &one, NULL);
		kill(getpid(), sig);
		sleep(1);
		return 255;
	}
	return WEXITSTATUS(status);
}

// reap_before_go runs before the Go runtime: given the reaper's argument
// it does the whole run and exits; otherwise it returns and main runs
// (which says how the reaper is used). Only glibc hands a constructor the
// program's arguments; with another C library there is no constructor,
// and main reaps in Go.
#ifdef __GLIBC__
__attribute__((constructor)) static void reap_before_go(int argc, char **argv, char **envp) {
	(void)envp;
	if (argc > 1 && strcmp(argv[1], REAPER_ARG) == 0)
		_exit(reap(argc - 2, argv + 2));
}
#endif
