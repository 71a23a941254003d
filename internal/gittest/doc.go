// Package gittest serves git repositories over git's own smart HTTP on
// 127.0.0.1 for tests: Debian's git http-backend behind a handler that
// asks for an HTTP Basic password, counts requests and bytes, and can be
// told to refuse pushes. Its helpers make repositories with commits,
// branches and tags and read them back with git.
package gittest
