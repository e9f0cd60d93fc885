package loadtest

import (
	"bufio"
	"bytes"
	"io"
	"strconv"
	"strings"
)

// sseEvent is one event of a text/event-stream.
type sseEvent struct {
	ID    string // the id field; "" when the event had none
	Event string // the event type; "message" when the event had none
	Data  string // the data lines joined by "\n"
}

// sseReader reads a text/event-stream as the HTML standard's
// EventSource does: lines end in LF, CR or CRLF; a line starting with
// ":" is a comment; "field: value" sets a field (one leading space of
// the value dropped); an empty line dispatches the event when it has
// data. Retry is the last valid reconnect delay in milliseconds the
// stream asked for (0 when none).
type sseReader struct {
	r     *bufio.Reader
	Retry int
	// LastID is the last event id the stream set (kept across events, as
	// EventSource's last event ID is).
	LastID string
	// afterCR: the last line ended in CR, so an LF next is part of it.
	afterCR bool
}

func newSSEReader(r io.Reader) *sseReader { return &sseReader{r: bufio.NewReaderSize(r, 64<<10)} }

// Next returns the next dispatched event, or the error that ended the
// stream (io.EOF when it ended cleanly; a partial event is dropped, as
// the standard says).
func (s *sseReader) Next() (sseEvent, error) {
	var ev sseEvent
	var data strings.Builder
	hasData := false
	for {
		line, err := s.line()
		if err != nil {
			return sseEvent{}, err
		}
		if line == "" {
			if !hasData {
				ev.Event = ""
				continue
			}
			ev.Data = data.String()
			ev.ID = s.LastID
			if ev.Event == "" {
				ev.Event = "message"
			}
			return ev, nil
		}
		if line[0] == ':' {
			continue
		}
		field, value, found := strings.Cut(line, ":")
		if found {
			value = strings.TrimPrefix(value, " ")
		}
		switch field {
		case "event":
			ev.Event = value
		case "data":
			if hasData {
				data.WriteByte('\n')
			}
			data.WriteString(value)
			hasData = true
		case "id":
			if !strings.ContainsRune(value, 0) {
				s.LastID = value
			}
		case "retry":
			if n, err := strconv.Atoi(value); err == nil && n >= 0 && strings.Trim(value, "0123456789") == "" {
				s.Retry = n
			}
		}
	}
}

// line reads one line without its end (LF, CR or CRLF), scanning what
// is buffered for either end at once.
func (s *sseReader) line() (string, error) {
	if s.afterCR {
		// The LF of a CRLF may come in a later read: it ends no line.
		s.afterCR = false
		b, err := s.r.Peek(1)
		if err != nil {
			return "", err
		}
		if b[0] == '\n' {
			_, _ = s.r.Discard(1)
		}
	}
	var acc []byte
	for {
		if _, err := s.r.Peek(1); err != nil {
			return "", err
		}
		buf, _ := s.r.Peek(s.r.Buffered())
		i := bytes.IndexAny(buf, "\r\n")
		if i < 0 {
			acc = append(acc, buf...)
			_, _ = s.r.Discard(len(buf))
			continue
		}
		acc = append(acc, buf[:i]...)
		s.afterCR = buf[i] == '\r'
		_, _ = s.r.Discard(i + 1)
		return string(acc), nil
	}
}
