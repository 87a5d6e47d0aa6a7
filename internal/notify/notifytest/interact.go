package notifytest

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Block Kit limits the stand-in checks on every chat.postMessage, as Slack
// documents them (https://docs.slack.dev/reference/block-kit/blocks/actions-block,
// .../block-elements/button-element, .../composition-objects/confirmation-dialog-object):
// Slack answers invalid_blocks for a message beyond any of them.
const (
	maxActionsElements = 25
	maxButtonText      = 75
	maxButtonValue     = 2000
	maxActionID        = 255
	maxBlockID         = 255
	maxButtonURL       = 3000
	maxConfirmTitle    = 100
	maxConfirmText     = 300
	maxConfirmButton   = 30
	// responseURLUses is how often a response_url may be used (Slack: up
	// to 5 times within 30 minutes).
	responseURLUses = 5
	responseURLLife = 30 * time.Minute
	// AckTimeout is how long Slack waits for an app to answer an
	// interaction; later, the person sees an error even if the app acts.
	AckTimeout = 3 * time.Second
)

// checkBlocks validates the interactive parts of a message's blocks
// against Slack's limits; it returns Slack's error message, "" when valid.
func checkBlocks(blocks []map[string]any) string {
	for i, b := range blocks {
		ptr := fmt.Sprintf("/blocks/%d", i)
		if id, _ := b["block_id"].(string); utf8.RuneCountInString(id) > maxBlockID {
			return tooLong(maxBlockID, ptr+"/block_id")
		}
		if b["type"] != "actions" {
			continue
		}
		elems, _ := b["elements"].([]any)
		if len(elems) == 0 {
			return fmt.Sprintf("[ERROR] must provide at least 1 items [json-pointer:%s/elements]", ptr)
		}
		if len(elems) > maxActionsElements {
			return fmt.Sprintf("[ERROR] no more than %d items allowed [json-pointer:%s/elements]", maxActionsElements, ptr)
		}
		ids := map[string]bool{}
		for j, e := range elems {
			el, _ := e.(map[string]any)
			ep := fmt.Sprintf("%s/elements/%d", ptr, j)
			id, _ := el["action_id"].(string)
			if utf8.RuneCountInString(id) > maxActionID {
				return tooLong(maxActionID, ep+"/action_id")
			}
			if id != "" && ids[id] {
				return fmt.Sprintf("[ERROR] duplicate action_id %q [json-pointer:%s/action_id]", id, ep)
			}
			ids[id] = true
			if el["type"] != "button" {
				continue
			}
			text, _ := el["text"].(map[string]any)
			if text == nil || text["type"] != "plain_text" {
				return fmt.Sprintf("[ERROR] must be a plain_text text object [json-pointer:%s/text]", ep)
			}
			if s, _ := text["text"].(string); s == "" || utf8.RuneCountInString(s) > maxButtonText {
				return tooLong(maxButtonText, ep+"/text/text")
			}
			if v, _ := el["value"].(string); utf8.RuneCountInString(v) > maxButtonValue {
				return tooLong(maxButtonValue, ep+"/value")
			}
			if u, _ := el["url"].(string); utf8.RuneCountInString(u) > maxButtonURL {
				return tooLong(maxButtonURL, ep+"/url")
			}
			if st, ok := el["style"].(string); ok && st != "primary" && st != "danger" {
				return fmt.Sprintf("[ERROR] must be one of primary, danger [json-pointer:%s/style]", ep)
			}
			if c, ok := el["confirm"].(map[string]any); ok {
				for _, f := range []struct {
					key string
					max int
				}{{"title", maxConfirmTitle}, {"text", maxConfirmText}, {"confirm", maxConfirmButton}, {"deny", maxConfirmButton}} {
					o, _ := c[f.key].(map[string]any)
					s, _ := o["text"].(string)
					if (f.key == "title" || f.key == "text") && s == "" {
						return fmt.Sprintf("[ERROR] missing required field: %s [json-pointer:%s/confirm/%s]", f.key, ep, f.key)
					}
					if utf8.RuneCountInString(s) > f.max {
						return tooLong(f.max, fmt.Sprintf("%s/confirm/%s/text", ep, f.key))
					}
				}
			}
		}
	}
	return ""
}

func tooLong(limit int, ptr string) string {
	return fmt.Sprintf("[ERROR] must be less than %d characters [json-pointer:%s]", limit+1, ptr)
}

// Button is an interactive button of a posted message.
type Button struct {
	BlockID  string
	ActionID string
	Text     string
	Value    string
	Style    string
}

// Buttons lists the buttons of a posted message, in order.
func (p Posted) Buttons() []Button {
	// Other blocks' elements differ in shape (a context block's text is a
	// string): only actions blocks are decoded further.
	var blocks []struct {
		Type     string          `json:"type"`
		BlockID  string          `json:"block_id"`
		Elements json.RawMessage `json:"elements"`
	}
	if len(p.Blocks) == 0 || json.Unmarshal(p.Blocks, &blocks) != nil {
		return nil
	}
	var out []Button
	for _, b := range blocks {
		if b.Type != "actions" {
			continue
		}
		var elems []struct {
			Type     string `json:"type"`
			ActionID string `json:"action_id"`
			Value    string `json:"value"`
			Style    string `json:"style"`
			Text     struct {
				Text string `json:"text"`
			} `json:"text"`
		}
		if json.Unmarshal(b.Elements, &elems) != nil {
			continue
		}
		for _, e := range elems {
			if e.Type == "button" {
				out = append(out, Button{BlockID: b.BlockID, ActionID: e.ActionID, Text: e.Text.Text, Value: e.Value, Style: e.Style})
			}
		}
	}
	return out
}

// Button finds the button of a posted message with the text (e.g.
// "Keep 4 h"); ok is false when it has none.
func (p Posted) Button(text string) (Button, bool) {
	for _, b := range p.Buttons() {
		if b.Text == text {
			return b, true
		}
	}
	return Button{}, false
}

// Response is one answer posted to a response_url.
type Response struct {
	// URL is the response_url it was posted to.
	URL string
	// Text, ResponseType ("ephemeral" or "in_channel"), ReplaceOriginal
	// and DeleteOriginal as sent.
	Text            string
	ResponseType    string
	ReplaceOriginal bool
	DeleteOriginal  bool
}

// Interaction is a block_actions request as Slack sends it to an app's
// Request URL: a form body with one field, payload, holding the JSON.
// Sign it, then Send it; Send again to replay it.
type Interaction struct {
	// Body is the raw form body (payload=<JSON>).
	Body []byte
	// Payload is the JSON in it.
	Payload []byte
	// ResponseURL is the payload's response_url, served by the stand-in.
	ResponseURL string
	// Header holds X-Slack-Request-Timestamp and X-Slack-Signature once
	// signed.
	Header http.Header
}

// Press makes the request Slack sends when user presses the button with
// the text on msg (a message the stand-in accepted): a block_actions
// payload with the user, the action (action_id, block_id, value, text),
// the container (channel_id, message_ts, thread_ts for a reply), the
// message with its blocks, and a fresh response_url on the stand-in.
// user must be a user the stand-in knows.
func (s *Server) Press(user string, msg Posted, text string) (*Interaction, error) {
	b, ok := msg.Button(text)
	if !ok {
		var have []string
		for _, x := range msg.Buttons() {
			have = append(have, x.Text)
		}
		return nil, fmt.Errorf("message %s has no button %q (it has %q)", msg.TS, text, have)
	}
	s.mu.Lock()
	email, known := s.users[user]
	s.seq++
	n := s.seq
	respURL := fmt.Sprintf("%sresponse_url/T0KUBEMED/%d/%s", s.ts.GetAPIURL(), n, strconv.FormatInt(int64(n)*7919, 36))
	s.responseURLs[respURL] = &responseURL{created: time.Now()}
	s.mu.Unlock()
	if !known {
		return nil, fmt.Errorf("user %s is not in the workspace (AddUser)", user)
	}
	now := time.Now()
	actionTS := fmt.Sprintf("%d.%06d", now.Unix(), now.Nanosecond()/1000)
	message := map[string]any{"type": "message", "ts": msg.TS, "text": msg.Text, "bot_id": "B0KUBEMED", "blocks": msg.Blocks}
	container := map[string]any{"type": "message", "message_ts": msg.TS, "channel_id": msg.Channel, "is_ephemeral": false}
	if msg.ThreadTS != "" {
		message["thread_ts"] = msg.ThreadTS
		container["thread_ts"] = msg.ThreadTS
	}
	payload := map[string]any{
		"type":         "block_actions",
		"user":         map[string]any{"id": user, "username": strings.Split(email, "@")[0], "name": strings.Split(email, "@")[0], "team_id": "T0KUBEMED"},
		"api_app_id":   "A0KUBEMED",
		"token":        "deprecated-verification-token",
		"container":    container,
		"trigger_id":   fmt.Sprintf("%d.%d.kubemedic", now.Unix(), n),
		"team":         map[string]any{"id": "T0KUBEMED", "domain": "kubemedic"},
		"channel":      map[string]any{"id": msg.Channel, "name": "directmessage"},
		"message":      message,
		"state":        map[string]any{"values": map[string]any{}},
		"response_url": respURL,
		"actions": []any{map[string]any{
			"type": "button", "action_id": b.ActionID, "block_id": b.BlockID, "value": b.Value,
			"text": map[string]any{"type": "plain_text", "text": b.Text, "emoji": true}, "action_ts": actionTS,
		}},
	}
	raw, err := json.Marshal(payload)
	if err != nil {
		return nil, err
	}
	body := []byte(url.Values{"payload": {string(raw)}}.Encode())
	return &Interaction{Body: body, Payload: raw, ResponseURL: respURL, Header: http.Header{}}, nil
}

// Signed signs the request as Slack does: X-Slack-Request-Timestamp is
// at's Unix time and X-Slack-Signature is
// v0=hex(HMAC-SHA256(secret, "v0:<timestamp>:<body>")). Sign with a
// wrong secret to forge one, or with a time more than 5 minutes ago for a
// stale one. It returns in.
func (in *Interaction) Signed(secret string, at time.Time) *Interaction {
	ts := strconv.FormatInt(at.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	_, _ = fmt.Fprintf(mac, "v0:%s:", ts)
	_, _ = mac.Write(in.Body)
	in.Header = http.Header{}
	in.Header.Set("X-Slack-Request-Timestamp", ts)
	in.Header.Set("X-Slack-Signature", "v0="+hex.EncodeToString(mac.Sum(nil)))
	return in
}

// Send posts the request to endpoint (the app's Request URL) with its
// headers as they are, as Slack does (Content-Type
// application/x-www-form-urlencoded, User-Agent Slackbot). It returns
// the status and body. Sending it again is a replay. Like Slack, it waits
// AckTimeout for the answer: an app that answers later gets an error
// here, as the person who pressed gets one from Slack.
func (in *Interaction) Send(endpoint string) (int, string, error) {
	req, err := http.NewRequest(http.MethodPost, endpoint, bytes.NewReader(in.Body))
	if err != nil {
		return 0, "", err
	}
	for k, v := range in.Header {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("User-Agent", "Slackbot 1.0 (+https://api.slack.com/robots)")
	c := &http.Client{Timeout: AckTimeout}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", fmt.Errorf("no answer within Slack's %s (Slack shows the person an error): %w", AckTimeout, err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, string(b), nil
}

type responseURL struct {
	created time.Time
	uses    int
}

// Responses are the answers posted to response_urls so far, oldest first.
func (s *Server) Responses() []Response {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Response(nil), s.responses...)
}

// ResponsesTo are the answers posted to one interaction's response_url.
func (s *Server) ResponsesTo(in *Interaction) []Response {
	var out []Response
	for _, r := range s.Responses() {
		if r.URL == in.ResponseURL {
			out = append(out, r)
		}
	}
	return out
}

// respond serves the response_urls that Press hands out, as Slack does:
// a JSON message, at most 5 uses within 30 minutes, 404 for an unknown
// URL.
func (s *Server) respond(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	full := s.ts.GetAPIURL() + strings.TrimPrefix(r.URL.Path, "/")
	var msg struct {
		Text            string `json:"text"`
		ResponseType    string `json:"response_type"`
		ReplaceOriginal bool   `json:"replace_original"`
		DeleteOriginal  bool   `json:"delete_original"`
	}
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	s.mu.Lock()
	u, ok := s.responseURLs[full]
	switch {
	case !ok:
		s.mu.Unlock()
		http.Error(w, "no_such_url", http.StatusNotFound)
		return
	case u.uses >= responseURLUses || time.Since(u.created) > responseURLLife:
		s.mu.Unlock()
		http.Error(w, "expired_url", http.StatusNotFound)
		return
	}
	if err := json.Unmarshal(body, &msg); err != nil || (msg.Text == "" && !msg.DeleteOriginal) {
		s.mu.Unlock()
		http.Error(w, "invalid_payload", http.StatusBadRequest)
		return
	}
	u.uses++
	s.responses = append(s.responses, Response{URL: full, Text: msg.Text, ResponseType: msg.ResponseType, ReplaceOriginal: msg.ReplaceOriginal, DeleteOriginal: msg.DeleteOriginal})
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
	w.Header().Set("Content-Type", "text/html")
	_, _ = io.WriteString(w, "ok")
}
