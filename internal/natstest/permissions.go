package natstest

import "github.com/nats-io/nats-server/v2/server"

// WithUsers adds users, each with its own password and optional
// permissions, to the server's global account. Connect does not log in as
// any of them: pass nats.UserInfo to it.
func WithUsers(users ...*server.User) Option {
	return func(o *server.Options) { o.Users = append(o.Users, users...) }
}
