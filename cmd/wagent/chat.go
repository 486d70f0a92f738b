package main

import "github.com/urfave/cli/v2"

func chat(c *cli.Context, env *cliEnv, id string) error {
	return fail(exitUsage, "chat: not yet")
}
