package journal

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"time"
	"unicode/utf8"
)

// castagnoli is the CRC-32C table; CRC-32C has hardware support on amd64 and
// arm64, so checksumming a 1 MiB payload costs microseconds.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// envelope is the on-disk form of an entry, one JSON object per file.
//
// Exactly one of Payload and PayloadBase64 carries the payload: Payload when
// the bytes are a JSON object or array (an Alertmanager webhook, readable
// with cat and jq), PayloadBase64 otherwise. Payload is spliced in verbatim
// rather than marshalled, because encoding/json compacts and HTML-escapes a
// json.RawMessage and the journal must give back the exact bytes it was
// given. JSON whitespace around the object (Alertmanager's encoder ends the
// body with a newline) is kept in PayloadPrefix and PayloadSuffix, because
// decoding a json.RawMessage drops it.
//
// CRC32C covers ID, Key, Received and the payload bytes (see checksum), so a
// torn write, a truncated file or a flipped bit is detected at Open or Load.
type envelope struct {
	ID            string          `json:"id"`
	Key           string          `json:"key"`
	Received      time.Time       `json:"received"`
	CRC32C        uint32          `json:"crc32c"`
	PayloadBase64 []byte          `json:"payloadBase64,omitempty"`
	PayloadPrefix string          `json:"payloadPrefix,omitempty"`
	PayloadSuffix string          `json:"payloadSuffix,omitempty"`
	Payload       json.RawMessage `json:"payload,omitempty"`
}

// encode returns the file content for e. Received must already be in UTC.
func encode(e Entry) ([]byte, error) {
	// encoding/json would replace invalid UTF-8 with U+FFFD, and the entry
	// would then fail its checksum at Open: refuse it now instead.
	if !utf8.ValidString(e.Key) {
		return nil, fmt.Errorf("encode entry %s: key is not valid UTF-8", e.ID)
	}
	env := envelope{
		ID:       e.ID,
		Key:      e.Key,
		Received: e.Received,
		CRC32C:   checksum(e.ID, e.Key, e.Received, e.Payload),
	}
	prefix, core, suffix := splitJSON(e.Payload)
	raw := core != nil
	if raw {
		env.PayloadPrefix, env.PayloadSuffix = string(prefix), string(suffix)
	} else {
		env.PayloadBase64 = e.Payload
	}
	head, err := json.Marshal(env)
	if err != nil {
		return nil, fmt.Errorf("encode entry %s: %w", e.ID, err)
	}
	if !raw {
		return append(head, '\n'), nil
	}
	// head ends in '}'; splice `,"payload":<bytes>}` in its place.
	out := make([]byte, 0, len(head)+len(core)+16)
	out = append(out, head[:len(head)-1]...)
	out = append(out, `,"payload":`...)
	out = append(out, core...)
	out = append(out, "}\n"...)
	return out, nil
}

// decode parses and verifies file content. It is strict: unknown fields,
// trailing data, both or a malformed payload, and a checksum mismatch are
// errors.
func decode(data []byte) (Entry, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var env envelope
	if err := dec.Decode(&env); err != nil {
		if errors.Is(err, io.EOF) {
			return Entry{}, errors.New("empty file")
		}
		return Entry{}, fmt.Errorf("malformed envelope: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Entry{}, errors.New("malformed envelope: data after the envelope object")
	}
	if env.Received.IsZero() {
		return Entry{}, errors.New("malformed envelope: missing received")
	}
	if len(env.Payload) > 0 && len(env.PayloadBase64) > 0 {
		return Entry{}, errors.New("malformed envelope: both payload and payloadBase64 are set")
	}
	if len(env.Payload) == 0 && (env.PayloadPrefix != "" || env.PayloadSuffix != "") {
		return Entry{}, errors.New("malformed envelope: payloadPrefix or payloadSuffix without payload")
	}
	payload := []byte(env.PayloadBase64)
	if len(env.Payload) > 0 {
		payload = make([]byte, 0, len(env.PayloadPrefix)+len(env.Payload)+len(env.PayloadSuffix))
		payload = append(payload, env.PayloadPrefix...)
		payload = append(payload, env.Payload...)
		payload = append(payload, env.PayloadSuffix...)
	}
	received := env.Received.UTC()
	if got := checksum(env.ID, env.Key, received, payload); got != env.CRC32C {
		return Entry{}, fmt.Errorf("checksum mismatch: file says crc32c %d, content has %d", env.CRC32C, got)
	}
	return Entry{ID: env.ID, Key: env.Key, Received: received, Payload: payload}, nil
}

// checksum is CRC32C over the length-prefixed fields, so that moving bytes
// from one field to the next changes it.
func checksum(id, key string, received time.Time, payload []byte) uint32 {
	var n [8]byte
	c := uint32(0)
	field := func(b []byte) {
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		c = crc32.Update(c, castagnoli, n[:])
		c = crc32.Update(c, castagnoli, b)
	}
	field([]byte(id))
	field([]byte(key))
	field([]byte(received.Format(time.RFC3339Nano)))
	field(payload)
	return c
}

// splitJSON splits p into JSON whitespace, a JSON object or array, and JSON
// whitespace. core is nil if p is not that shape, and p is then stored as
// base64. Only an object or array is stored verbatim: a bare scalar such as
// null would be ambiguous with an absent field.
func splitJSON(p []byte) (prefix, core, suffix []byte) {
	const ws = " \t\r\n"
	trimmed := bytes.TrimLeft(p, ws)
	prefix = p[:len(p)-len(trimmed)]
	core = bytes.TrimRight(trimmed, ws)
	suffix = trimmed[len(core):]
	if len(core) < 2 {
		return nil, nil, nil
	}
	first, last := core[0], core[len(core)-1]
	if (first != '{' || last != '}') && (first != '[' || last != ']') {
		return nil, nil, nil
	}
	if !json.Valid(core) {
		return nil, nil, nil
	}
	return prefix, core, suffix
}
