package workspace

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentgate/agentgate/internal/files"
	"github.com/agentgate/agentgate/internal/gitrepo"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/unpack"
)

// Credentials finds the token of a tenant's named git credential for a
// URL (gitrepo.CredentialsFile); errors are *runs.FieldError.
type Credentials interface {
	Lookup(tenant, name, url string) (string, error)
}

// Archives gives an uploaded archive's bytes (files.Uploads).
type Archives interface {
	Archive(ctx context.Context, tenant, id string) (files.File, []byte, error)
}

// Sources makes runs' directories from their sources. A nil field turns
// its source off: a run that names it is refused.
type Sources struct {
	// Git clones repositories through this replica's cache; Policy says
	// which URLs it may reach, Credentials with which tokens.
	Git         *gitrepo.Cache
	Policy      gitrepo.Policy
	Credentials Credentials
	// Archives holds the uploaded archives; Unpack bounds them.
	Archives Archives
	Unpack   unpack.Limits
	// Store restores other runs' directories.
	Store *Store
	// MaxPatchBytes bounds a run's patch (default 16 MiB).
	MaxPatchBytes int64
}

// Prepared is how a run's directory was made.
type Prepared struct {
	Info runs.WorkspaceInfo
	// Git is the clone's state, for Conclude; nil for other sources.
	Git *GitWork
}

// GitWork is what a git workspace's run needs when it ends: where it came
// from, and how to reach it again.
type GitWork struct {
	URL        string
	Credential string
	// Base is the commit the run started from; Ref what its ref resolved
	// to ("refs/heads/main"), which a push may not overwrite.
	Base, Ref string
}

// Check refuses, before a run is queued, a source this gateway cannot
// use: a URL its policy refuses, a credential the tenant lacks, a file
// that is not the tenant's archive. A run of another run is the
// supervisor's to check. Errors are *runs.FieldError or *files.Refusal.
func (s *Sources) Check(ctx context.Context, tenant string, src runs.WorkspaceSource) error {
	switch {
	case src.Git != nil:
		if s.Git == nil {
			return runs.Invalid(runs.FieldWorkspace+".git", "this gateway is not set up to clone repositories")
		}
		if err := s.Policy.CheckSource(*src.Git); err != nil {
			return err
		}
		_, err := s.token(tenant, *src.Git)
		return err
	case src.Archive != "":
		if s.Archives == nil {
			return runs.Invalid(runs.FieldWorkspace+".archive", "this gateway keeps no uploaded archives")
		}
		_, _, err := s.Archives.Archive(ctx, tenant, src.Archive)
		return err
	}
	return nil
}

// token is the tenant's token for src, or "" when it names no credential.
func (s *Sources) token(tenant string, src runs.GitSource) (string, error) {
	if src.Credential == "" {
		return "", nil
	}
	if s.Credentials == nil {
		return "", runs.Invalid(gitrepo.FieldGitCredential, "this gateway has no git credentials (AGENTGATE_GIT_CREDENTIALS_FILE)")
	}
	return s.Credentials.Lookup(tenant, src.Credential, src.URL)
}

// Prepare fills dir, an empty directory, from src, for a run of tenant.
// Its errors are *runs.RunError, with the class that says why.
func (s *Sources) Prepare(ctx context.Context, tenant string, src runs.WorkspaceSource, dir string) (Prepared, *runs.RunError) {
	start := time.Now()
	var p Prepared
	var err error
	switch {
	case src.Git != nil:
		p, err = s.clone(ctx, tenant, *src.Git, dir)
	case src.Archive != "":
		p.Info.Source, err = runs.SourceArchive, s.unpackArchive(ctx, tenant, src.Archive, dir)
	case src.FromRun != "":
		p.Info.Source, p.Info.Restored = runs.SourceFromRun, true
		_, err = s.Store.Restore(ctx, runs.SnapshotKey{Tenant: tenant, Kind: runs.SnapshotWorkspace, ID: src.FromRun}, dir)
	default:
		p.Info.Source = runs.SourceEmpty
	}
	if err != nil {
		return Prepared{}, prepareError(src, err)
	}
	p.Info.PrepareMS = time.Since(start).Milliseconds()
	return p, nil
}

func (s *Sources) clone(ctx context.Context, tenant string, src runs.GitSource, dir string) (Prepared, error) {
	if s.Git == nil {
		return Prepared{}, errors.New("this gateway replica is not set up to clone repositories")
	}
	token, err := s.token(tenant, src)
	if err != nil {
		return Prepared{}, err
	}
	c, err := s.Git.Clone(ctx, gitrepo.Remote{URL: src.URL, Token: token}, src.Ref, dir)
	if err != nil {
		return Prepared{}, err
	}
	return Prepared{
		Info: runs.WorkspaceInfo{Source: runs.SourceGit, CacheHit: c.CacheHit, Base: c.Base},
		Git:  &GitWork{URL: src.URL, Credential: src.Credential, Base: c.Base, Ref: c.Ref},
	}, nil
}

func (s *Sources) unpackArchive(ctx context.Context, tenant, id, dir string) error {
	if s.Archives == nil {
		return errors.New("this gateway replica keeps no uploaded archives")
	}
	_, data, err := s.Archives.Archive(ctx, tenant, id)
	if err != nil {
		return err
	}
	_, err = unpack.Unpack(ctx, bytes.NewReader(data), int64(len(data)), dir, s.Unpack)
	return err
}

// prepareError is why a run's directory could not be made, as the run's
// error.
func prepareError(src runs.WorkspaceSource, err error) *runs.RunError {
	var ge *gitrepo.Error
	var ue *unpack.Error
	switch {
	case errors.As(err, &ge):
		return runs.NewRunError(ge.Class, "the run's repository could not be cloned: "+ge.Error(), gitHint(ge.Class))
	case errors.As(err, &ue) && src.FromRun != "":
		return runs.NewRunError(runs.WorkspaceFailed, fmt.Sprintf("the workspace of run %s could not be restored (%s): %s", src.FromRun, ue.Code, ue.Message),
			"start from the run's repository or an archive")
	case errors.As(err, &ue):
		return runs.NewRunError(runs.WorkspaceFailed, fmt.Sprintf("the uploaded archive is not safe to unpack (%s): %s", ue.Code, ue.Message),
			"upload an archive of plain files and directories, within the gateway's bounds")
	case errors.Is(err, runs.ErrNotFound) && src.FromRun != "":
		return runs.NewRunError(runs.WorkspaceFailed, "the workspace of run "+src.FromRun+" is no longer kept", "start from the run's repository or an archive")
	}
	var fe *runs.FieldError
	if errors.As(err, &fe) && src.Git != nil {
		return runs.NewRunError(runs.GitAuthFailed, "the run's git credential is not usable: "+fe.Error(), "ask the operator for a credential that covers the repository")
	}
	return runs.NewRunError(runs.WorkspaceFailed, "the run's directory could not be prepared: "+err.Error(), "")
}

func gitHint(c runs.Class) string {
	switch c {
	case runs.GitAuthFailed:
		return "check that the credential named in workspace.git.credential is valid for the repository"
	case runs.GitNotFound:
		return "check workspace.git.url and workspace.git.ref"
	case runs.GitUnreachable:
		return "check that the git server is up and reachable from the gateway, then submit the run again"
	}
	return ""
}
