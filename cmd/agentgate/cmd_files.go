package main

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"text/tabwriter"
)

const filesHelp = `Without PATH, lists the files the finished run changed. With PATH,
downloads that file of the run's directory (as it is now). --diff prints
the run's unified diff, --archive its directory as a tar.gz. -o FILE
writes to FILE (replaced whole once the download is complete) instead of
stdout; an archive is never written to a terminal.`

func setupFiles(fs *flag.FlagSet) func(a *app, args []string) int {
	var diff, archive bool
	var out string
	fs.BoolVar(&diff, "diff", false, "print the run's unified diff")
	fs.BoolVar(&archive, "archive", false, "download the run's directory as a tar.gz")
	fs.StringVar(&out, "o", "", "write to `FILE` instead of stdout")
	return func(a *app, args []string) int {
		switch {
		case len(args) == 0 || len(args) > 2:
			return a.usageFail("files", "want a run ID and at most one path")
		case diff && archive:
			return a.usageFail("files", "--diff or --archive, not both")
		case (diff || archive) && len(args) == 2:
			return a.usageFail("files", "a path with --diff or --archive")
		case out != "" && !diff && !archive && len(args) == 1:
			return a.usageFail("files", "-o needs a PATH, --diff or --archive")
		}
		id := args[0]
		c, err := a.client()
		if err != nil {
			return errorExit(a.stderr, err)
		}
		defer c.close()
		switch {
		case diff:
			return a.download(c, runPath(id, "diff"), out, false)
		case archive:
			return a.download(c, runPath(id, "archive"), out, true)
		case len(args) == 2:
			return a.download(c, runPath(id, "files", filePath(args[1])), out, false)
		}
		var list struct {
			Files     []changedFile `json:"files"`
			Truncated bool          `json:"truncated"`
		}
		raw, err := c.call(a.ctx, http.MethodGet, runPath(id, "files"), nil, nil, &list)
		if err != nil {
			return errorExit(a.stderr, err)
		}
		if a.g.json {
			return a.printJSON(raw)
		}
		tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
		for _, f := range list.Files {
			p := oneLine(f.Path, 4096)
			if f.Binary {
				p += " (binary)"
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\n", f.Kind, f.Size, p)
		}
		if err := tw.Flush(); err != nil {
			return errorExit(a.stderr, err)
		}
		if list.Truncated {
			fmt.Fprintln(a.stderr, "agentgate: the list is cut at the run record's bound; the replica that ran the run has it whole")
		}
		return exitOK
	}
}

// download writes what GET path answers to out ("" or "-": stdout),
// replacing out only once all of it has arrived. A binary download is not
// written to a terminal.
func (a *app) download(c *client, path, out string, binary bool) int {
	toStdout := out == "" || out == "-"
	if toStdout && binary && isTerminal(a.stdout) {
		return a.usageFail("files", "an archive is not written to a terminal: use -o FILE or a pipe")
	}
	req, err := c.request(a.ctx, http.MethodGet, path, nil, nil)
	if err != nil {
		return errorExit(a.stderr, err)
	}
	resp, err := c.send(req)
	if err != nil {
		return errorExit(a.stderr, err)
	}
	defer resp.Body.Close()
	if resp.Header.Get("X-Diff-Truncated") == "true" {
		fmt.Fprintln(a.stderr, "agentgate: the diff is cut at the gateway's bound")
	}
	broke := func(err error) int {
		if a.ctx.Err() != nil {
			return errorExit(a.stderr, a.ctx.Err())
		}
		return errorExit(a.stderr, &connectError{url: c.base.String(), err: fmt.Errorf("the download broke off: %w", err)})
	}
	if toStdout {
		if _, err := io.Copy(a.stdout, resp.Body); err != nil {
			return broke(err)
		}
		return exitOK
	}
	dir, base := filepath.Split(out)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, "."+base+".*.part")
	if err != nil {
		return errorExit(a.stderr, err)
	}
	defer os.Remove(tmp.Name()) // after a rename, nothing is there
	if _, err := io.Copy(tmp, resp.Body); err != nil {
		tmp.Close()
		return broke(err)
	}
	if err := tmp.Close(); err != nil {
		return errorExit(a.stderr, err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return errorExit(a.stderr, err)
	}
	if err := os.Rename(tmp.Name(), out); err != nil {
		return errorExit(a.stderr, err)
	}
	return exitOK
}
