// Package plugin finds, launches and supervises rlhost plugins: task plugins
// (rlhost-task-NAME) and trace backends (rlhost-trace-NAME).
//
// Discovery looks, in order, in every directory of RLHOST_PLUGIN_PATH, then ./bin/plugins, then
// ~/.rlhost/plugins; the first binary of a name wins. Launch starts a binary through
// hashicorp/go-plugin with the rlhost handshake, mutual TLS (one-time P-256 certificates), protocol-version negotiation and
// optional SHA-256 pinning, and routes the plugin's hclog JSON lines into the host's log under
// the plugin's name, keeping its last lines for error messages.
//
// Task (and Trace) wrap a supervised process: a plugin that crashes or stops answering is
// restarted with exponential backoff on the next call, and the call that was in flight fails
// with an error naming the plugin, the call and the plugin's last log lines. A crashed plugin
// never takes the host down. Close stops the process and waits for it; no orphans remain.
package plugin
