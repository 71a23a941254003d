package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"go.uber.org/zap"

	"github.com/agentgate/agentgate/internal/files"
	"github.com/agentgate/agentgate/internal/gitrepo"
	"github.com/agentgate/agentgate/internal/unpack"
	"github.com/agentgate/agentgate/internal/workspace"
)

// gitCacheSweep is how often the replica's cache of repositories is
// evicted to its bounds.
const gitCacheSweep = 10 * time.Minute

// openWorkspaces makes what runs' workspaces come from: the tenants'
// uploads, the operator's git credentials (re-read when they change) and
// URL policy, and this replica's cache of repositories under the data
// directory, kept to its bounds.
func (g *instance) openWorkspaces(context.Context) error {
	cfg := g.cfg
	ctx, stop := context.WithCancel(context.Background())
	g.onClose(stop)
	g.uploads = files.NewUploads(g.st, files.Limits{TTL: cfg.FileTTL, MaxBytes: cfg.HTTP.MaxFileBytes,
		MaxArchiveBytes: cfg.HTTP.MaxArchiveBytes, MaxPerTenant: cfg.MaxFilesPerTenant}, nil)
	policy, err := gitrepo.ParsePolicy(cfg.GitAllowHosts)
	if err != nil {
		return fmt.Errorf("AGENTGATE_GIT_ALLOW_HOSTS: %w", err)
	}
	cache, err := gitrepo.New(gitrepo.Config{
		Dir: filepath.Join(cfg.DataDir, "git"), MaxBytes: cfg.GitCacheBytes, MaxAge: cfg.GitCacheMaxAge,
		Logger: g.log.Named("git"), Pin: policy.Pinner(gitrepo.SystemLookup),
	})
	if err != nil {
		return fmt.Errorf("git cache: %w", err)
	}
	g.sources = &workspace.Sources{Git: cache, Policy: policy, Archives: g.uploads, Unpack: unpack.DefaultLimits(),
		Store: workspace.NewStore(g.st, filepath.Join(cfg.DataDir, "tmp"), workspace.RestoreLimits(cfg.MaxWorkspaceBytes))}
	if cfg.GitCredentialsFile != "" {
		creds, err := gitrepo.WatchCredentials(ctx, cfg.GitCredentialsFile, g.log.Named("git"), 0)
		if err != nil {
			return fmt.Errorf("AGENTGATE_GIT_CREDENTIALS_FILE: %w", err)
		}
		g.sources.Credentials = creds
		g.gitTokenFiles = creds.Credentials().TokenFiles()
		g.log.Info("git credentials loaded", zap.String("file", cfg.GitCredentialsFile), zap.Int("credentials", creds.Credentials().Len()))
	}
	go g.evictGitCache(ctx, cache)
	return nil
}

// evictGitCache keeps the cache to its bounds until the gateway stops.
func (g *instance) evictGitCache(ctx context.Context, cache *gitrepo.Cache) {
	t := time.NewTicker(gitCacheSweep)
	defer t.Stop()
	for {
		if _, err := cache.Evict(ctx); err != nil && ctx.Err() == nil {
			g.log.Warn("evict the git cache", zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
