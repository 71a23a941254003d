package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRunServesUntilCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-scenario", "tool", "-command", "touch x"}, pw)
		pw.Close()
	}()
	url, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	url = strings.TrimSpace(url)
	if !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Fatalf("printed %q", url)
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Post(url+"/v1/messages", "application/json",
		bytes.NewReader([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`)))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `"command":"touch x"`) {
		t.Errorf("answer = %s", b)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("run = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("run did not return after cancel")
	}
}

// TestRunOpenAI serves the Responses API mock: the printed URL is a Codex
// base_url, ending in /v1.
func TestRunOpenAI(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-api", "openai", "-scenario", "tool", "-command", "touch x"}, pw)
		pw.Close()
	}()
	url, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	url = strings.TrimSpace(url)
	if !strings.HasPrefix(url, "http://127.0.0.1:") || !strings.HasSuffix(url, "/v1") {
		t.Fatalf("printed %q", url)
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Post(url+"/responses", "application/json",
		bytes.NewReader([]byte(`{"model":"m","input":[{"type":"message","role":"user","content":"hi"}]}`)))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `"name":"exec_command"`) || !strings.Contains(string(b), `\"cmd\":\"touch x\"`) {
		t.Errorf("answer = %s", b)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("run = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("run did not return after cancel")
	}
}

func TestRunRefuses(t *testing.T) {
	for _, args := range [][]string{{"-scenario", "nope"}, {"-addr", "0.0.0.0:0"}, {"-bogus"},
		{"-api", "gemini"}, {"-api", "openai", "-scenario", "stream-error"}, {"-api", "openai", "-addr", "0.0.0.0:0"}} {
		if err := run(context.Background(), args, io.Discard); err == nil {
			t.Errorf("run(%q) = nil", args)
		}
	}
}
