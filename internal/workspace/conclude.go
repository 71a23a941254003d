package workspace

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentgate/agentgate/internal/gitrepo"
	"github.com/agentgate/agentgate/internal/runs"
)

// DefaultMaxPatchBytes bounds a run's patch when Sources.MaxPatchBytes is
// not set.
const DefaultMaxPatchBytes = 16 << 20

// Concluded is what became of a git workspace when its run ended.
type Concluded struct {
	Result runs.GitResult
	// Patch is the change as format-patch mail; nil when nothing changed
	// or it could not be made.
	Patch []byte
}

// Conclude commits what the run changed in dir on its base, in a git
// directory the gateway owns (the workspace's own .git is never used),
// makes its patch and, when push asks, pushes it to a new branch of the
// repository. A push that fails is in the result's Error; the run's own
// outcome stands.
func (s *Sources) Conclude(ctx context.Context, tenant string, gw GitWork, push *runs.PushSpec, dir, runID string) Concluded {
	out := Concluded{Result: runs.GitResult{URL: gw.URL, Base: gw.Base}}
	if push != nil {
		out.Result.Branch = push.Branch
	}
	fail := func(err error) Concluded {
		out.Result.Error = concludeError(err)
		return out
	}
	if s.Git == nil {
		return fail(errors.New("this gateway replica is not set up for git"))
	}
	token, err := s.token(tenant, runs.GitSource{URL: gw.URL, Credential: gw.Credential})
	if err != nil {
		return fail(err)
	}
	remote := gitrepo.Remote{URL: gw.URL, Token: token}
	ch, err := s.Git.Commit(ctx, remote, dir, gw.Base, commitMessage(push, runID))
	if err != nil {
		return fail(err)
	}
	defer ch.Close()
	out.Result.Commit = ch.Commit
	if ch.Commit == "" {
		return out
	}
	max := s.MaxPatchBytes
	if max <= 0 {
		max = DefaultMaxPatchBytes
	}
	if out.Patch, err = ch.Patch(ctx, max); err != nil {
		out.Patch = nil
		out.Result.Error = concludeError(fmt.Errorf("make the patch: %w", err))
	}
	if push == nil {
		return out
	}
	if err := ch.Push(ctx, remote, push.Branch, gw.Ref); err != nil {
		return fail(err)
	}
	out.Result.Pushed = true
	return out
}

// commitMessage is the push's message, or a line naming the run.
func commitMessage(push *runs.PushSpec, runID string) string {
	if push != nil && push.Message != "" {
		return push.Message
	}
	return "Changes of agentgate run " + runID
}

func concludeError(err error) *runs.RunError {
	var ge *gitrepo.Error
	if errors.As(err, &ge) {
		return runs.NewRunError(ge.Class, ge.Error(), gitHint(ge.Class))
	}
	return runs.NewRunError(runs.GitFailed, err.Error(), "")
}
