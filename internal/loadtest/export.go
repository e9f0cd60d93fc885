package loadtest

// ImportEvent is the body of a POST /api/events publishing
// contact.import.completed with import id id (the receiver tallies it).
func ImportEvent(id string) []byte { return importEvent(id) }
