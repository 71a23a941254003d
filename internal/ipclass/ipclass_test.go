package ipclass

import (
	"net/netip"
	"testing"
)

func TestOf(t *testing.T) {
	for addr, want := range map[string]Kind{
		"8.8.8.8":                Public,
		"2606:4700::1111":        Public,
		"64:ff9b::808:808":       Public, // NAT64 of 8.8.8.8
		"::ffff:8.8.8.8":         Public,
		"127.0.0.1":              Internal,
		"::1":                    Internal,
		"10.1.2.3":               Internal,
		"172.31.0.1":             Internal,
		"192.168.1.1":            Internal,
		"100.64.0.1":             Internal,
		"fd12::1":                Internal,
		"::ffff:10.0.0.1":        Internal, // mapped: its IPv4 address
		"64:ff9b::a00:1":         Internal, // NAT64 of 10.0.0.1
		"64:ff9b:1::1":           Internal,
		"2001::1":                Internal, // Teredo
		"2002:a00:1::1":          Internal, // 6to4
		"::127.0.0.1":            Internal, // IPv4-compatible
		"169.254.169.254":        Infrastructure,
		"fd00:ec2::254":          Infrastructure, // inside fc00::/7, yet metadata
		"100.100.100.200":        Infrastructure, // inside 100.64/10, yet metadata
		"64:ff9b::a9fe:a9fe":     Infrastructure, // NAT64 of 169.254.169.254
		"169.254.1.1":            Infrastructure,
		"fe80::1":                Infrastructure,
		"fe80::1%eth0":           Infrastructure, // the zone does not hide it
		"0.0.0.0":                Infrastructure,
		"::":                     Infrastructure,
		"224.0.0.1":              Infrastructure,
		"ff02::1":                Infrastructure,
		"255.255.255.255":        Infrastructure,
		"240.0.0.1":              Infrastructure,
		"::ffff:169.254.169.254": Infrastructure,
	} {
		kind, what := Of(netip.MustParseAddr(addr))
		if kind != want || (kind == Public) != (what == "") {
			t.Errorf("Of(%s) = %v %q, want kind %v and a reason only when not public", addr, kind, what, want)
		}
	}
	if kind, _ := Of(netip.Addr{}); kind != Infrastructure {
		t.Errorf("Of(the zero Addr) = %v, want Infrastructure", kind)
	}
}

// FuzzOf: every address has one kind, the same as its mapped and zoned
// forms', and a reason exactly when it is not public.
func FuzzOf(f *testing.F) {
	f.Add([]byte{10, 0, 0, 1})
	f.Add([]byte{0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0, 169, 254, 169, 254})
	f.Fuzz(func(t *testing.T, b []byte) {
		ip, ok := netip.AddrFromSlice(b)
		if !ok {
			return
		}
		kind, what := Of(ip)
		if (kind == Public) != (what == "") {
			t.Fatalf("Of(%s) = %v %q", ip, kind, what)
		}
		if ip.Is4() {
			if k, _ := Of(netip.AddrFrom16(ip.As16())); k != kind {
				t.Fatalf("%s is %v, its mapped form %v", ip, kind, k)
			}
		} else if k, _ := Of(ip.WithZone("eth0")); k != kind {
			t.Fatalf("%s is %v, with a zone %v", ip, kind, k)
		}
	})
}
