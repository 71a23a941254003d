package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/agentgate/agentgate/internal/auth"
)

// runKeysCommand is `gateway keys …`, run instead of the gateway:
//
//	keys new --tenant T --role R [--id ID]   make a key: print its secret once, and its keys file line
//	keys check FILE                          validate a keys file
//
// It returns the process's exit code: 0, 1 on failure, 2 on bad usage.
func runKeysCommand(args []string, stdout, stderr io.Writer) int {
	usage := func() {
		fmt.Fprintln(stderr, "usage: gateway keys new --tenant TENANT --role admin|write|read [--id KEY_ID]")
		fmt.Fprintln(stderr, "       gateway keys check FILE")
	}
	if len(args) == 0 {
		usage()
		return 2
	}
	switch args[0] {
	case "new":
		return keysNew(args[1:], stdout, stderr)
	case "check":
		return keysCheck(args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		usage()
		return 0
	}
	fmt.Fprintf(stderr, "gateway keys: unknown command %q\n", args[0])
	usage()
	return 2
}

func keysNew(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("gateway keys new", flag.ContinueOnError)
	fs.SetOutput(stderr)
	tenant := fs.String("tenant", "", "the tenant that owns the key (required)")
	role := fs.String("role", "", "admin, write or read (required)")
	id := fs.String("id", "", "the key's id in logs and the audit trail (default: TENANT-<8 hex>)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "gateway keys new: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if !auth.ValidName(*tenant) {
		fmt.Fprintln(stderr, "gateway keys new: --tenant is required and must match [a-z0-9][a-z0-9_.-]{0,62}")
		return 2
	}
	r, err := auth.ParseRole(*role)
	if err != nil {
		fmt.Fprintln(stderr, "gateway keys new: --role:", err)
		return 2
	}
	if *id == "" {
		var b [4]byte
		if _, err := rand.Read(b[:]); err != nil {
			fmt.Fprintln(stderr, "gateway keys new:", err)
			return 1
		}
		// The tenant is at most 63 bytes, so cut it to leave room for the
		// suffix within the 63 a key-id may have.
		t := *tenant
		if len(t) > 54 {
			t = t[:54]
		}
		*id = t + "-" + hex.EncodeToString(b[:])
	}
	if !auth.ValidName(*id) {
		fmt.Fprintln(stderr, "gateway keys new: --id must match [a-z0-9][a-z0-9_.-]{0,62}")
		return 2
	}
	secret, err := auth.NewKey()
	if err != nil {
		fmt.Fprintln(stderr, "gateway keys new:", err)
		return 1
	}
	// The comments go to stdout too, so that the whole output can be read
	// as one note; the secret's line is not a valid keys file line, so
	// pasting all of it into the file fails loudly rather than storing
	// the secret there.
	fmt.Fprintf(stdout, "# key %s: tenant %s, role %s\n", *id, *tenant, r)
	fmt.Fprintln(stdout, "# secret (shown only now; the client sends it as Authorization: Bearer <secret>):")
	fmt.Fprintln(stdout, secret)
	fmt.Fprintln(stdout, "# add this line to the keys file (AGENTGATE_API_KEYS_FILE):")
	fmt.Fprintln(stdout, auth.Line(*id, *tenant, r, secret))
	return 0
}

func keysCheck(args []string, stdout, stderr io.Writer) int {
	if len(args) == 1 && isHelp(args[0]) && args[0] != "help" {
		fmt.Fprintln(stdout, "usage: gateway keys check FILE")
		return 0
	}
	if len(args) != 1 {
		fmt.Fprintln(stderr, "usage: gateway keys check FILE")
		return 2
	}
	f, err := os.Open(args[0])
	if err != nil {
		fmt.Fprintln(stderr, "gateway keys check:", err)
		return 1
	}
	defer f.Close()
	kr, err := auth.ParseKeys(f)
	if err != nil {
		fmt.Fprintf(stderr, "gateway keys check: %s: %v\n", args[0], err)
		return 1
	}
	fmt.Fprintf(stdout, "%s: %d keys, %d tenants\n", args[0], kr.Len(), len(kr.Tenants()))
	return 0
}
