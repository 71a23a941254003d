package proctree

import (
	"strings"
	"testing"
)

const hybridMountinfo = `31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime shared:9 - cgroup2 cgroup2 rw
`

func TestCgroup2Mount(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{hybridMountinfo, "/sys/fs/cgroup/unified", true},
		{"25 1 0:22 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n", "/sys/fs/cgroup", true},
		{`25 1 0:22 / /mnt/my\040cg rw - cgroup2 none rw` + "\n", "/mnt/my cg", true},
		{"32 31 0:29 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n", "", false},
		{"garbage\n - cgroup2\n", "", false},
		{"", "", false},
	} {
		got, ok := cgroup2Mount([]byte(tc.in))
		if got != tc.want || ok != tc.ok {
			t.Errorf("cgroup2Mount(%q) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestParseEvents(t *testing.T) {
	ev := parseEvents([]byte("populated 1\nfrozen 0\nbad\nx y\n"))
	if ev["populated"] != 1 || ev["frozen"] != 0 || len(ev) != 2 {
		t.Fatalf("parseEvents = %v", ev)
	}
}

func TestInstanceNames(t *testing.T) {
	name, err := instanceName(1)
	if err != nil {
		t.Fatal(err)
	}
	pid, start, ok := parseInstance(name)
	if !ok || pid != 1 || !alive(pid, start) {
		t.Fatalf("parseInstance(%q) = %d, %d, %v", name, pid, start, ok)
	}
	if alive(pid, start+1) {
		t.Fatal("a process with another start time counts as alive")
	}
	for _, bad := range []string{"", "1-2", "x-2-ab", "1-y-ab", "0-2-ab", "1-2-ab-c"} {
		if _, _, ok := parseInstance(bad); ok {
			t.Errorf("parseInstance(%q) accepted it", bad)
		}
	}
	if got := cgroupName("gw.example/1"); got != "gw_example_1" {
		t.Errorf("cgroupName = %q", got)
	}
	if validName("a.b") || validName("") || validName("../x") || !validName("0190-ab_C") {
		t.Error("validName")
	}
}

func FuzzCgroup2Mount(f *testing.F) {
	f.Add([]byte(hybridMountinfo))
	f.Add([]byte(`25 1 0:22 / /mnt/my\040cg\ rw - cgroup2 none rw`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if mnt, ok := cgroup2Mount(b); ok && !strings.HasPrefix(mnt, "/") {
			t.Fatalf("mount point %q is not absolute", mnt)
		}
	})
}

func FuzzParseEvents(f *testing.F) {
	f.Add([]byte("populated 1\nfrozen 0\n"))
	f.Fuzz(func(t *testing.T, b []byte) { parseEvents(b) })
}

func FuzzParseInstance(f *testing.F) {
	f.Add("123-456-abcd")
	f.Fuzz(func(t *testing.T, s string) {
		if pid, _, ok := parseInstance(s); ok && pid <= 0 {
			t.Fatalf("pid %d accepted", pid)
		}
	})
}

func TestParseCgroupFile(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"0::/agentgate/r/1-2-ab/run\n", "/agentgate/r/1-2-ab/run", true},
		{"12:cpu,cpuacct:/x\n1:name=systemd:/y\n0::/unified/z\n", "/unified/z", true},
		{"0::/\n", "/", true},
		{"12:cpu:/x\n", "", false},
		{"0::relative\n", "", false},
		{"0::/a/../b\n", "", false},
		{"0::/a/..\n", "", false},
		{"", "", false},
	} {
		got, ok := parseCgroupFile([]byte(tc.in))
		if got != tc.want || ok != tc.ok {
			t.Errorf("parseCgroupFile(%q) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func FuzzParseCgroupFile(f *testing.F) {
	f.Add([]byte("0::/agentgate/r/1-2-ab/run\n"))
	f.Add([]byte("12:cpu,cpuacct:/x\n0::/y\n"))
	f.Add([]byte("0::/a/../b"))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, ok := parseCgroupFile(b)
		if ok && (!strings.HasPrefix(p, "/") || strings.Contains(p, "\n") || strings.Contains(p+"/", "/../")) {
			t.Fatalf("parseCgroupFile(%q) = %q, a path that is not absolute and clean", b, p)
		}
	})
}
