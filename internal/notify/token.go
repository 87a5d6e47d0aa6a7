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
	if file == "" {
		return strings.TrimSpace(os.Getenv(env)), nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("read Slack token: %w", err)
	}
	t := strings.TrimSpace(string(b))
	if t == "" {
		return "", fmt.Errorf("slack token file %s is empty", file)
	}
	return t, nil
}
