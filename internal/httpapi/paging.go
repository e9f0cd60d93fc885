package httpapi

import "github.com/chatmsg/gateway/internal/store"

// page turns the optional page/perPage query values into a store.Page; the
// validator has already written the document's defaults and bounds.
func page(number, perPage *int, defaultPerPage int) store.Page {
	p := store.Page{Number: 1, PerPage: defaultPerPage}
	if number != nil && *number > 0 {
		p.Number = *number
	}
	if perPage != nil && *perPage > 0 {
		p.PerPage = *perPage
	}
	return p
}
