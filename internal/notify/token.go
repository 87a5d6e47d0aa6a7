package notify

import (
	"fmt"
	"os"
	"strings"
)

// EnvSlackToken is the environment variable that holds the Slack bot token
// when no token file is given. A token is never a flag value: flags show in
// ps and in the pod spec.
const EnvSlackToken = "KUBEMEDIC_SLACK_TOKEN"

// TokenFromFileOrEnv reads the Slack bot token from file, or, when file is
// "", from the environment variable env. Surrounding white space (a
// trailing newline in a Secret) is dropped. A file that cannot be read is
// an error that wraps os.ReadFile's (errors.Is(err, fs.ErrNotExist) for a
// missing file); an empty file is an error too. An unset or empty variable
// is no token: "" and no error. Errors name the file, never its content.
func TokenFromFileOrEnv(file, env string) (string, error) {
	return secretFromFileOrEnv("Slack token", "slack token", file, env)
}

// EnvSlackSigningSecret is the environment variable that holds the Slack
// app's signing secret when no file is given.
const EnvSlackSigningSecret = "KUBEMEDIC_SLACK_SIGNING_SECRET"

// SigningSecretFromFileOrEnv reads the Slack app's signing secret (Basic
// Information → App Credentials) as TokenFromFileOrEnv reads the token.
func SigningSecretFromFileOrEnv(file, env string) (string, error) {
	return secretFromFileOrEnv("Slack signing secret", "slack signing secret", file, env)
}

func secretFromFileOrEnv(what, lower, file, env string) (string, error) {
	if file == "" {
		return strings.TrimSpace(os.Getenv(env)), nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", what, err)
	}
	t := strings.TrimSpace(string(b))
	if t == "" {
		return "", fmt.Errorf("%s file %s is empty", lower, file)
	}
	return t, nil
}
