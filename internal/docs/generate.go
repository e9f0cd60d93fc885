package docs

// Copy the renderers' browser bundles from the pinned npm packages into gen/docs (embedded).
//go:generate ../../.tools/docs/bundle.sh ../../gen/docs
