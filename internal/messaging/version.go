package messaging

// bumpVersion is the SET clause every UPDATE of a message adds when it
// changes something the message's event or REST representation shows
// (status, text, edited, revoked_at, external_id). Bumping in the same
// statement makes the version as serial as the row's changes: two
// concurrent changes (a receipt racing an edit) take the row lock in turn,
// and each reads the version the other wrote, so no two states share one.
// The event published in that transaction carries the new version
// (Message.Version), and a subscriber applies an event only when its
// version is greater than the one it holds (asyncapi/subscriber.Versions).
const bumpVersion = "version = version + 1"
