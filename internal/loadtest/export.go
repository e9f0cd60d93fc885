package loadtest

// ImportEvent is the body of a POST /api/events publishing
// contact.import.completed with import id id (the receiver tallies it).
func ImportEvent(id string) []byte { return importEvent(id) }

// Base is the client's base URL (the next one, round-robin).
func (c *Client) Base() string { return c.base() }
