package api

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/agentgate/agentgate/internal/files"
	"github.com/agentgate/agentgate/internal/runs"
)

// Members of a run's workspace and push.
const (
	wsGit        = "git"
	wsArchive    = "archive"
	wsFromRun    = "from_run"
	gitURL       = "url"
	gitRef       = "ref"
	gitCred      = "credential"
	pushBranch   = "branch"
	pushMessage  = "message"
	maxPushBytes = 16 << 10 // a commit message
)

var (
	workspaceMembers = []string{wsGit, wsArchive, wsFromRun}
	gitMembers       = []string{gitURL, gitRef, gitCred}
	pushMembers      = []string{pushBranch, pushMessage}
)

// decodeWorkspace reads the workspace field: one of git, archive and
// from_run. The shape is checked here; whether the URL may be reached, the
// credential exists and the file or run is the tenant's is the service's
// to check, when the run is submitted.
func decodeWorkspace(f fields, name string, spec *runs.Spec) error {
	raw := f.get(name)
	if raw == nil {
		return nil
	}
	members, err := readObjectField(name, raw, `must be an object with one of "git", "archive" or "from_run"`)
	if err != nil {
		return err
	}
	w, err := membersAt(name, members, workspaceMembers)
	if err != nil {
		return err
	}
	if given := len(w); given != 1 {
		return invalidField(name, fmt.Sprintf(`must have exactly one of "git", "archive" or "from_run" (it has %d)`, given))
	}
	src := &runs.WorkspaceSource{}
	switch {
	case w.get(wsGit) != nil:
		src.Git, err = decodeGitSource(name+"."+wsGit, w.get(wsGit))
	case w.get(wsArchive) != nil:
		src.Archive, err = decodeFileRef(w, name+"."+wsArchive, wsArchive)
	case w.get(wsFromRun) != nil:
		src.FromRun, err = decodeRunRef(w, name+"."+wsFromRun, wsFromRun)
	default:
		return invalidField(name, `must have one of "git", "archive" or "from_run" set to a value, not null`)
	}
	if err != nil {
		return err
	}
	spec.Workspace = src
	return nil
}

func decodeGitSource(at string, raw []byte) (*runs.GitSource, error) {
	members, err := readObjectField(at, raw, `must be an object: {"url": …, "ref": …, "credential": …}`)
	if err != nil {
		return nil, err
	}
	g, err := membersAt(at, members, gitMembers)
	if err != nil {
		return nil, err
	}
	var src runs.GitSource
	if src.URL, err = boundedString(g, gitURL, at+"."+gitURL, runs.MaxGitURLBytes, true); err != nil {
		return nil, err
	}
	if src.Ref, err = boundedString(g, gitRef, at+"."+gitRef, runs.MaxGitRefBytes, false); err != nil {
		return nil, err
	}
	if src.Credential, err = boundedString(g, gitCred, at+"."+gitCred, runs.MaxGitRefBytes, false); err != nil {
		return nil, err
	}
	return &src, nil
}

// decodePush reads the push field: the branch the run's changes go to,
// and the commit's message.
func decodePush(f fields, name string, spec *runs.Spec) error {
	raw := f.get(name)
	if raw == nil {
		return nil
	}
	members, err := readObjectField(name, raw, `must be an object: {"branch": …, "message": …}`)
	if err != nil {
		return err
	}
	p, err := membersAt(name, members, pushMembers)
	if err != nil {
		return err
	}
	var push runs.PushSpec
	if push.Branch, err = boundedString(p, pushBranch, name+"."+pushBranch, runs.MaxGitRefBytes, true); err != nil {
		return err
	}
	if push.Message, err = boundedString(p, pushMessage, name+"."+pushMessage, maxPushBytes, false); err != nil {
		return err
	}
	spec.Push = &push
	return nil
}

// membersAt indexes the members of the object at by name, as byName does,
// naming the member in full ("workspace.git.rf") when it is refused.
func membersAt(at string, members []member, known []string) (fields, error) {
	for i, m := range members {
		if !slices.Contains(known, m.name) {
			msg := "unknown field " + quote(at+"."+m.name)
			if c := closest(m.name, known); c != "" {
				msg += " (did you mean " + strconv.Quote(at+"."+c) + "?)"
			}
			return nil, edgeErr(http.StatusBadRequest, CodeUnknownField, echoed(at+"."+m.name), msg)
		}
		for _, prev := range members[:i] {
			if prev.name == m.name {
				return nil, invalidField(at+"."+m.name, "appears more than once")
			}
		}
	}
	return byName(members, known)
}

// readObjectField reads raw, the value of field at, as an object.
func readObjectField(at string, raw []byte, shape string) ([]member, error) {
	if len(raw) == 0 || raw[0] != '{' {
		return nil, invalidField(at, shape)
	}
	members, err := readObject(raw)
	if err != nil {
		return nil, invalidField(at, shape)
	}
	return members, nil
}

// boundedString is the string member of f, named at in errors: UTF-8, at
// most limit bytes, and not empty when required.
func boundedString(f fields, member, at string, limit int, required bool) (string, error) {
	s, ok, err := f.str(member)
	if err != nil {
		return "", invalidField(at, "must be a string")
	}
	switch {
	case required && (!ok || s == ""):
		return "", invalidField(at, "is required")
	case len(s) > limit:
		return "", invalidField(at, fmt.Sprintf("must be at most %d bytes", limit))
	case !utf8.ValidString(s):
		return "", invalidField(at, "must be valid UTF-8")
	}
	return s, nil
}

func decodeFileRef(f fields, at, member string) (string, error) {
	id, err := boundedString(f, member, at, 128, true)
	if err == nil && !files.ValidID(id) {
		err = invalidField(at, "must be the id of an uploaded file (POST /v1/files)")
	}
	return id, err
}

func decodeRunRef(f fields, at, member string) (string, error) {
	id, err := boundedString(f, member, at, 128, true)
	if err != nil {
		return "", err
	}
	if _, perr := uuid.Parse(id); perr != nil || len(id) != 36 {
		return "", invalidField(at, "must be a run's id")
	}
	return id, nil
}
