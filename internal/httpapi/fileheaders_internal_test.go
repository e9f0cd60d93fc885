package httpapi

import "testing"

func TestHardenedFileHeaders(t *testing.T) {
	t.Parallel()
	cases := []struct {
		contentType, fileName string
		wantType, wantDisp    string
	}{
		{"image/jpeg", "a.jpg", "image/jpeg", "inline; filename=a.jpg"},
		{"IMAGE/PNG", "a.png", "image/png", "inline; filename=a.png"},
		{"video/mp4", "v.mp4", "video/mp4", "inline; filename=v.mp4"},
		{"audio/ogg; codecs=opus", "v.ogg", "audio/ogg; codecs=opus", "inline; filename=v.ogg"},
		{"application/pdf", "invoice.pdf", "application/pdf", "attachment; filename=invoice.pdf"},
		{"image/svg+xml", "x.svg", "image/svg+xml", "attachment; filename=x.svg"},
		{"image/SVG+xml; charset=utf-8", "x.svg", "image/svg+xml; charset=utf-8", "attachment; filename=x.svg"},
		{" Image/Svg+Xml ", "x.svg", "image/svg+xml", "attachment; filename=x.svg"},
		{"text/html; charset=utf-8", "x.html", "text/html; charset=utf-8", "attachment; filename=x.html"},
		{"text/xml", "x.xml", "text/xml", "attachment; filename=x.xml"},
		{"", "blob", "application/octet-stream", "attachment; filename=blob"},
		{"not a type", "blob", "application/octet-stream", "attachment; filename=blob"},
		{"image/png", "na\"me .png", "image/png", `inline; filename="na\"me .png"`},
	}
	for _, tc := range cases {
		t.Run(tc.contentType, func(t *testing.T) {
			h := hardenedFileHeaders(tc.contentType, tc.fileName)
			if h.contentType != tc.wantType || h.disposition != tc.wantDisp || h.nosniff != "nosniff" || h.csp != "sandbox; default-src 'none'" {
				t.Fatalf("got %+v, want type %q disposition %q", h, tc.wantType, tc.wantDisp)
			}
		})
	}
}
