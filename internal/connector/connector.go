// Package connector is the contract between the connections capability and
// the drivers that hold a live chat-app session for a connection: the
// simulator (package sim, deterministic, the default) and the real driver
// over go.mau.fi/whatsmeow (package whatsmeow). A driver knows nothing of
// companies, leases or messages in the database; the connections capability
// decides which replica opens a session and what happens to its events.
package connector

import (
	"context"
	"time"
)

// Account is the connection a session is opened for.
type Account struct {
	ChannelID int64
	// CompanyID owns the connection; the simulator keeps each company's
	// view of the chat app (who is on it, address books) apart.
	CompanyID int64
	// Key is the connection's number, digits with country code.
	Key string
	// DeviceRef identifies the paired device to restore, as the driver
	// reported it to Handler.Paired; empty when the connection was never
	// paired or was logged out.
	DeviceRef string
}

// Driver opens sessions. One driver serves every connection of a replica.
type Driver interface {
	// Name is the configuration name of the driver (simulator, whatsmeow).
	Name() string
	// Open builds the session of acct and, when acct.DeviceRef is set,
	// connects it with the stored credentials. Events of the session go to h
	// until Close. Errors: fault.Unavailable when the chat app cannot be
	// reached.
	Open(ctx context.Context, acct Account, h Handler) (Session, error)
}

// Handler receives what a session reports. Calls come from the driver's own
// goroutines (or from the simulator's control calls, which return the
// handler's error to their caller); implementations must not block for long.
type Handler interface {
	// Paired reports a completed pairing; deviceRef is what Open needs to
	// restore the session later.
	Paired(ctx context.Context, deviceRef string) error
	// LoggedOut reports that the chat app ended the session (the phone
	// removed the linked device, or the credentials were rejected).
	LoggedOut(ctx context.Context, reason string) error
	// Inbound reports a message a contact sent.
	Inbound(ctx context.Context, m Inbound) error
	// Receipt reports a delivery or read receipt of a message sent earlier.
	Receipt(ctx context.Context, r Receipt) error
	// Changed reports that a message stored earlier was edited or revoked
	// by whoever wrote it.
	Changed(ctx context.Context, c Change) error
	// State reports a change of the session's state (connected, logged
	// out, replaced, banned, …) with the chat app's reason.
	State(ctx context.Context, st SessionState) error
	// Holds confirms, before a driver reconnects on its own, that this
	// session still holds the connection: nil when it does, Unavailable
	// with MsgLeaseLost when another session took over (the driver then
	// stops for good, so it never connects over the new holder), another
	// error when that cannot be told now (the driver waits and asks again).
	Holds(ctx context.Context) error
}

// MsgLeaseLost is the message of the Unavailable fault a Handler answers
// once its session no longer holds the connection.
const MsgLeaseLost = "The connection is held by another replica"

// Connection states a session reports (the connection record's `state`).
const (
	// StateDisconnected: paired, not connected right now (reconnecting).
	StateDisconnected = "disconnected"
	// StateConnected: paired, connected and logged in.
	StateConnected = "connected"
	// StateLoggedOut: the chat app ended the pairing; pair again.
	StateLoggedOut = "logged_out"
	// StateReplaced: another client took the session over (stream
	// replaced); this replica stopped using it.
	StateReplaced = "replaced"
	// StateBanned: the chat app banned the number for a while.
	StateBanned = "banned"
	// StateOutdated: the chat app rejected the client version.
	StateOutdated = "outdated"
	// StateFailed: the chat app refused the connection for another reason.
	StateFailed = "failed"
)

// SessionState is a state change with the chat app's reason.
type SessionState struct {
	State  string
	Reason string
	// Terminal means the session stopped and will not reconnect by itself:
	// the holder closes it and gives the lease up.
	Terminal bool
}

// Change is an edit or a revoke of a message stored earlier, with who
// made it: the chat app relays whatever a (possibly modified) client sends,
// so the receiver checks that the author of the change wrote the message.
type Change struct {
	// ExternalID is the changed message's id.
	ExternalID string
	// Chat is the conversation the change was written in.
	Chat Chat
	// FromMe marks a change made by the connection's own account (on the
	// phone); otherwise SenderKey is the contact who made it (in a group,
	// the member).
	FromMe    bool
	SenderKey string
	// Revoked marks a revoke; otherwise Text is the new text.
	Revoked bool
	Text    string
	At      time.Time
}

// Edit and revoke time limits of the chat app: after them it refuses the
// change, so the gateway refuses it before calling the driver.
const (
	EditWindow   = 15 * time.Minute
	RevokeWindow = 48 * time.Hour
)

// Messages of the refusals past the time limits.
const (
	MsgEditTooLate   = "The chat app accepts edits only within 15 minutes of sending"
	MsgRevokeTooLate = "The chat app accepts revokes only within 48 hours of sending"
)

// IDGenerator is implemented by a driver whose chat app takes the message
// id from the sender: the id is chosen (and stored) before the first
// attempt, so a retry is the same message rather than a second one.
type IDGenerator interface {
	NewMessageID(acct Account) string
}

// PairingOptions name the linked device on the phone.
type PairingOptions struct {
	OS      string
	Browser string
	// PhoneCode asks the chat app for a code to type on the phone as well
	// (it pushes a notification to the phone, so only on request).
	PhoneCode bool `json:"phone_code,omitempty"`
}

// QRCode is the current pairing code of a session. It refreshes until the
// phone scans it or pairing times out.
type QRCode struct {
	// Payload is the text encoded in the QR image.
	Payload string
	// Code is the pairing code to type on the phone instead of scanning.
	Code      string
	ExpiresAt time.Time
}

// Session is the live chat-app session of one connection, owned by exactly
// one replica at a time. Errors (package fault): Rule with ErrNotLogged's
// message when the session is not logged in, Rule when already logged in
// (Pairing), NotFound for an unknown group, Invalid for a malformed key,
// Refused when the chat app answered no, Unavailable when it could not be
// reached.
type Session interface {
	// Pairing starts pairing when none is in progress (else keeps the one
	// running) and returns the current code.
	Pairing(ctx context.Context, opts PairingOptions) (QRCode, error)
	// Logged reports whether the session is paired and usable.
	Logged() bool
	// Logout unlinks the device from the phone and forgets its credentials.
	Logout(ctx context.Context) error
	// Close drops the live connection without logging out (lease lost,
	// shutdown); the credentials stay for the next Open.
	Close()

	Contacts(ctx context.Context) ([]Contact, error)
	Groups(ctx context.Context) ([]Group, error)
	// GroupInfo returns one group the account can see: membership, announce
	// mode and whether this account is an administrator.
	GroupInfo(ctx context.Context, groupKey string) (Group, error)
	// Check tells for each entry whether it has a chat-app account (or, with
	// groups, whether the group exists and is visible), in input order.
	Check(ctx context.Context, entries []string, groups bool) ([]NumberCheck, error)

	Send(ctx context.Context, m Outgoing) (Sent, error)
	Edit(ctx context.Context, chat Chat, externalID, text string) error
	Revoke(ctx context.Context, chat Chat, externalID string) error
}

// Chat is a recipient: a contact number or a group key (see keys.go).
type Chat struct {
	Key     string `json:"key"`
	IsGroup bool   `json:"is_group"`
}

// Contact is an entry of the account's address book.
type Contact struct {
	Key    string `json:"key"`
	Name   string `json:"name"`
	Notify string `json:"notify,omitempty"`
}

// Group is a group the account can see.
type Group struct {
	Key          string `json:"key"`
	Name         string `json:"name"`
	Announce     bool   `json:"announce"`
	IsMember     bool   `json:"is_member"`
	IsAdmin      bool   `json:"is_admin"`
	Participants int    `json:"participants"`
}

// NumberCheck is one answer of Check.
type NumberCheck struct {
	Entry  string `json:"entry"`
	Exists bool   `json:"exists"`
	// Key is the chat-app key of the account or group ("" when absent); it
	// can differ from the entry (e.g. without a mobile ninth digit).
	Key string `json:"key"`
}

// File is an attachment.
type File struct {
	Name        string `json:"name"`
	ContentType string `json:"content_type"`
	Data        []byte `json:"data"`
}

// Outgoing is a message to send.
type Outgoing struct {
	// ExternalID is the id chosen before the first attempt (IDGenerator);
	// every attempt sends it, so the chat app sees one message.
	ExternalID string `json:"external_id,omitempty"`
	Chat       Chat   `json:"chat"`
	Text       string `json:"text"`
	File       *File  `json:"file,omitempty"`
	// ReplyTo is the id of the message this one answers (quoted).
	ReplyTo string `json:"reply_to,omitempty"`
}

// Sent is the chat app's acceptance of a message.
type Sent struct {
	ExternalID string    `json:"external_id"`
	At         time.Time `json:"at"`
}

// Inbound is a message a contact sent to the connection.
type Inbound struct {
	ExternalID string `json:"external_id"`
	// Chat is where it was written: the contact, or the group.
	Chat Chat `json:"chat"`
	// ChatName is the group's subject when the driver knows it without
	// asking the chat app ("" otherwise).
	ChatName string `json:"chat_name,omitempty"`
	// SenderKey and SenderName are the contact who wrote it (in a group, the
	// member).
	SenderKey  string    `json:"sender_key"`
	SenderName string    `json:"sender_name"`
	Text       string    `json:"text"`
	TypeID     int       `json:"type_id"` // a msgtype id
	File       *File     `json:"file,omitempty"`
	SentAt     time.Time `json:"sent_at"`
	// FromMe marks a message the account itself wrote on the phone: stored
	// as sent, in the conversation with Chat.
	FromMe      bool   `json:"from_me,omitempty"`
	IsForwarded bool   `json:"is_forwarded,omitempty"`
	ReplyTo     string `json:"reply_to,omitempty"`
}

// MsgNotLogged is the message of the Rule fault every session operation
// but Pairing returns while the session is not logged in.
const MsgNotLogged = "Connection is not logged in"

// Receipt statuses use the message status ids of the API.
const (
	StatusSent      = 2
	StatusDelivered = 3
	StatusRead      = 4
	StatusFailed    = 5
)

// Receipt is a status the chat app reported for a sent message.
type Receipt struct {
	ExternalID string    `json:"external_id"`
	Chat       Chat      `json:"chat"`
	StatusID   int       `json:"status_id"`
	Reason     string    `json:"reason,omitempty"`
	At         time.Time `json:"at"`
}
