// Package lint holds tests that keep the module's layering: which of its
// packages may import which. It has no code of its own.
package lint
