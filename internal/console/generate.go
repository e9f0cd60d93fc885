package console

// Bundle the console's sources (.tools/console/src) with the pinned esbuild into gen/console (embedded).
//go:generate ../../.tools/console/build.sh ../../gen/console
