package api

import (
	"fmt"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/agentgate/agentgate/internal/runs"
)

// maxInputBody bounds the body of an input request: a message is at most
// runs.MaxMessageBytes of text, which JSON may escape up to six-fold.
const maxInputBody = 6*runs.MaxMessageBytes + 4<<10

// maxApprovalIDBytes bounds an approval id in a path.
const maxApprovalIDBytes = 256

// answerApproval answers POST /v1/runs/{id}/approvals/{approval_id}: 200
// with the resolved approval; 404 for an unknown approval, 409
// approval_resolved once it was answered, timed out or withdrawn.
func (s *server) answerApproval(w http.ResponseWriter, r *http.Request) {
	id, err := runID(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	approval := chi.URLParam(r, "approval_id")
	if approval == "" || len(approval) > maxApprovalIDBytes {
		s.fail(w, r, edgeErr(http.StatusNotFound, CodeNotFound, "", "no approval with id "+quote(approval)))
		return
	}
	in, err := s.inputBody(w, r, decodeDecision)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	in.ApprovalID = approval
	res, err := s.svc.Input(r.Context(), id, in)
	if err != nil {
		s.fail(w, r, fmt.Errorf("answer approval %s of run %s: %w", approval, id, err))
		return
	}
	if res.Approval == nil {
		s.fail(w, r, fmt.Errorf("answer approval %s of run %s: no approval in the answer", approval, id))
		return
	}
	s.writeJSON(w, r, http.StatusOK, res.Approval)
}

// messageAccepted is the body of a 202 to POST /v1/runs/{id}/messages.
type messageAccepted struct {
	ID   string `json:"id"`
	Mode string `json:"mode"`
}

// postMessage answers POST /v1/runs/{id}/messages: 202 with the message's
// id. queue starts a turn once the running one ends; steer adds the text
// to the running turn, for an agent that can (400 unsupported_option
// otherwise).
func (s *server) postMessage(w http.ResponseWriter, r *http.Request) {
	id, err := runID(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	in, err := s.messageBody(w, r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	res, err := s.svc.Input(r.Context(), id, in)
	if err != nil {
		s.fail(w, r, fmt.Errorf("message to run %s: %w", id, err))
		return
	}
	s.writeJSON(w, r, http.StatusAccepted, messageAccepted{ID: res.MessageID, Mode: in.Mode})
}

// accepted is the body of a 202 to interrupt and close.
type accepted struct {
	Status string `json:"status"`
}

// interruptTurn answers POST /v1/runs/{id}/interrupt: 202 once the CLI was
// told to end the running turn; 409 no_turn_running when none runs.
func (s *server) interruptTurn(w http.ResponseWriter, r *http.Request) {
	s.control(w, r, runs.InputInterrupt, "interrupting")
}

// closeSession answers POST /v1/runs/{id}/close: 202; the session ends
// after the running turn, or at once when idle.
func (s *server) closeSession(w http.ResponseWriter, r *http.Request) {
	s.control(w, r, runs.InputClose, "closing")
}

func (s *server) control(w http.ResponseWriter, r *http.Request, kind runs.InputKind, status string) {
	id, err := runID(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if _, err := s.inputBody(w, r, func(b []byte) (runs.Input, error) {
		_, err := readFields(b, nil)
		return runs.Input{}, err
	}); err != nil {
		s.fail(w, r, err)
		return
	}
	if _, err := s.svc.Input(r.Context(), id, runs.Input{Kind: kind}); err != nil {
		s.fail(w, r, fmt.Errorf("%s run %s: %w", kind, id, err))
		return
	}
	s.writeJSON(w, r, http.StatusAccepted, accepted{Status: status})
}

// inputBody reads an input request's body, which may be empty for
// interrupt and close but must otherwise be declared JSON.
func (s *server) inputBody(w http.ResponseWriter, r *http.Request, decode func([]byte) (runs.Input, error)) (runs.Input, error) {
	limit := min(s.cfg.MaxBodyBytes, maxInputBody)
	body, err := readBody(w, r, limit, s.cfg.BodyReadTimeout)
	if err != nil {
		return runs.Input{}, err
	}
	if len(body) > 0 {
		if err := checkJSONContentType(r.Header); err != nil {
			return runs.Input{}, err
		}
	}
	return decode(body)
}
