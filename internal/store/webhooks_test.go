package store

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/webhooks"
)

func testDelivery(runID, id string) webhooks.Delivery {
	now := time.Now().UTC().Truncate(time.Millisecond)
	return webhooks.Delivery{
		ID: id, RunID: runID, Event: runs.EventRunCompleted, Seq: 9, Target: webhooks.TargetRun,
		URL: "https://hooks.example.com/x?…", State: webhooks.Pending, CreatedAt: now, NextAttemptAt: &now,
		Attempts: []webhooks.Attempt{}, Tenant: "acme",
	}
}

// take takes the next message due within d, or returns false.
func take(t *testing.T, s *Store, d time.Duration) (webhooks.Taken, bool) {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	tk, err := s.TakeDelivery(c)
	if errors.Is(err, context.DeadlineExceeded) {
		return webhooks.Taken{}, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return tk, true
}

func TestWebhookDeliveryRecordAndQueue(t *testing.T) {
	e := newEnv(t)
	runID := newID(t)
	d := testDelivery(runID, "msg_0123abcd")
	msg := webhooks.Message{URL: "https://hooks.example.com/x?token=t0k", Body: []byte(`{"type":"run.completed"}`)}
	if err := e.s.CreateDelivery(ctx(t), d, msg); err != nil {
		t.Fatal(err)
	}
	// Created again (another replica saw the event): one record, one
	// message.
	if err := e.s.CreateDelivery(ctx(t), d, msg); err != nil {
		t.Fatal(err)
	}
	got, rev, err := e.s.Delivery(ctx(t), runID, d.ID)
	if err != nil || rev == 0 || got.ID != d.ID || got.Tenant != "acme" || got.State != webhooks.Pending {
		t.Fatalf("Delivery = %+v, %d, %v", got, rev, err)
	}
	tk, ok := take(t, e.s, 5*time.Second)
	if !ok || tk.RunID != runID || tk.ID != d.ID || tk.Message.URL != msg.URL || string(tk.Message.Body) != string(msg.Body) {
		t.Fatalf("taken = %+v, %v", tk, ok)
	}
	if _, again := take(t, e.s, 300*time.Millisecond); again {
		t.Fatal("the message was queued twice, or given to a second taker")
	}

	// An update at the revision read lands; one at an older one is stale.
	got.Attempts = append(got.Attempts, webhooks.Attempt{At: time.Now().UTC(), StatusCode: 500, Error: "the receiver answered 500"})
	if err := e.s.UpdateDelivery(ctx(t), got, rev); err != nil {
		t.Fatal(err)
	}
	got.State = webhooks.Failed
	if err := e.s.UpdateDelivery(ctx(t), got, rev); !errors.Is(err, webhooks.ErrStale) {
		t.Fatalf("stale update = %v", err)
	}

	// Given back with a delay: not due before it, due after.
	start := time.Now()
	if err := tk.Later(500 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if _, early := take(t, e.s, 200*time.Millisecond); early {
		t.Fatal("taken before its delay")
	}
	tk, ok = take(t, e.s, 10*time.Second)
	if !ok || time.Since(start) < 500*time.Millisecond {
		t.Fatalf("taken again after %s: %v", time.Since(start), ok)
	}
	if err := tk.Done(); err != nil {
		t.Fatal(err)
	}
	if _, again := take(t, e.s, 300*time.Millisecond); again {
		t.Fatal("taken after Done")
	}

	other := testDelivery(runID, "msg_ff")
	other.CreatedAt = other.CreatedAt.Add(time.Second)
	if err := e.s.CreateDelivery(ctx(t), other, msg); err != nil {
		t.Fatal(err)
	}
	list, err := e.s.Deliveries(ctx(t), runID)
	if err != nil || len(list) != 2 || list[0].ID != d.ID || len(list[0].Attempts) != 1 || list[1].ID != other.ID {
		t.Fatalf("Deliveries = %+v, %v", list, err)
	}
	if none, err := e.s.Deliveries(ctx(t), newID(t)); err != nil || len(none) != 0 {
		t.Fatalf("Deliveries of a run without any = %+v, %v", none, err)
	}
	if _, _, err := e.s.Delivery(ctx(t), runID, "msg_00"); !errors.Is(err, runs.ErrNotFound) {
		t.Fatalf("missing delivery = %v", err)
	}
	for _, bad := range []string{"", "msg_", "msg_XYZ", "msg_0.1", "other"} {
		if err := e.s.CreateDelivery(ctx(t), testDelivery(runID, bad), msg); !errors.Is(err, runs.ErrInvalid) {
			t.Errorf("CreateDelivery(%q) = %v", bad, err)
		}
	}
}

// TestWebhookQueueSurvivesRestart: a message waiting for its retry is
// there when the server comes back, for the replica that takes it then.
// Whether the server wrote down the retry's delay before it stopped is its
// own timing: if it did not, the message comes back after the ack wait
// from when it was taken, here 3 s instead of production's 2 minutes.
func TestWebhookQueueSurvivesRestart(t *testing.T) {
	e := &env{t: t, dir: t.TempDir()}
	opts := Options{webhookAckWait: 3 * time.Second}
	e.start(opts)
	t.Cleanup(e.stop)
	runID := newID(t)
	d := testDelivery(runID, "msg_01")
	if err := e.s.CreateDelivery(ctx(t), d, webhooks.Message{URL: "https://h.example/", Body: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	tk, ok := take(t, e.s, 5*time.Second)
	if !ok {
		t.Fatal("nothing queued")
	}
	if err := tk.Later(200 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	e.s.Close()
	e.nc.Close()
	e.stop()
	e.start(opts)
	tk, ok = take(t, e.s, 2*time.Minute)
	if !ok || tk.ID != d.ID {
		t.Fatalf("after a restart: %+v, %v", tk, ok)
	}
	if got, _, err := e.s.Delivery(ctx(t), runID, d.ID); err != nil || got.ID != d.ID {
		t.Fatalf("record after a restart = %+v, %v", got, err)
	}
}

// TestDelivererOnStore: a deliverer on the NATS store retries through the
// stream's delayed redelivery until the receiver takes the message.
func TestDelivererOnStore(t *testing.T) {
	e := newEnv(t)
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	pol, err := webhooks.ParseAllowList([]string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	secret, err := webhooks.ParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		t.Fatal(err)
	}
	d := webhooks.New(e.s, webhooks.Options{
		Secrets: []webhooks.Secret{secret}, Policy: pol, Timeout: 5 * time.Second,
		RetryMin: 50 * time.Millisecond, RetryMax: 100 * time.Millisecond, MaxAttempts: 4, RetryFor: time.Minute, Workers: 2,
	})
	d.Start()
	defer d.Close()
	runID := newID(t)
	d.NotifyWebhooks(runs.Run{ID: runID, Agent: "claude", Status: runs.Succeeded, Spec: runs.Spec{WebhookURL: srv.URL + "/hook"}},
		runs.StoredEvent{Seq: 3, Type: runs.EventRunCompleted,
			JSON: []byte(`{"v":1,"run_id":"` + runID + `","seq":3,"time":"2026-01-02T03:04:05Z","type":"run.completed","data":{}}`)})
	deadline := time.Now().Add(30 * time.Second)
	for {
		list, err := d.Deliveries(ctx(t), runID)
		if err != nil {
			t.Fatal(err)
		}
		if len(list) == 1 && list[0].State != webhooks.Pending {
			if list[0].State != webhooks.Delivered || len(list[0].Attempts) != 2 || list[0].Attempts[0].StatusCode != 503 {
				t.Fatalf("delivery = %+v", list[0])
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("never delivered: %+v", list)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
