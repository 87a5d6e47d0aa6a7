package diagnostics

import "time"

// Environment of a capture pod: the remediator sets these (the
// credentials from the store's Secret, by secretKeyRef, never in the
// template or a log line), and kubemedic-diag reads them.
const (
	EnvEndpoint  = "KUBEMEDIC_DIAG_ENDPOINT"
	EnvBucket    = "KUBEMEDIC_DIAG_BUCKET"
	EnvRegion    = "KUBEMEDIC_DIAG_REGION"
	EnvInsecure  = "KUBEMEDIC_DIAG_INSECURE"
	EnvAccessKey = "KUBEMEDIC_DIAG_ACCESS_KEY"
	EnvSecretKey = "KUBEMEDIC_DIAG_SECRET_KEY"
	// The operation's, as every operation pod gets them.
	EnvNode          = "KUBEMEDIC_NODE_NAME"
	EnvOperation     = "KUBEMEDIC_OPERATION"
	EnvTriggerType   = "KUBEMEDIC_TRIGGER_TYPE"
	EnvTriggerReason = "KUBEMEDIC_TRIGGER_REASON"
	EnvTriggerMsg    = "KUBEMEDIC_TRIGGER_MESSAGE"
	// EnvGPU is the UUID of the GPU the operation is about (its
	// status.gpu), when it names one.
	EnvGPU = "KUBEMEDIC_GPU_UUID"
)

// SpoolDir is the spool on the node's disk, under the host root.
const SpoolDir = "/var/lib/kubemedic/diagnostics"

// Secret keys of the credentials Secret.
const (
	SecretAccessKey = "accessKey"
	SecretSecretKey = "secretKey"
)

// MetaSHA256 is the user metadata key under which a bundle's SHA-256 is
// stored with the object (x-amz-meta-sha256), so that the store can be
// asked whether it holds exactly these bytes.
const MetaSHA256 = "Sha256"

// MetaGPU is the user metadata key of the UUID of the GPU a bundle is
// about (x-amz-meta-gpu), when the operation named one: retention keeps
// the bundles of GPUs excluded for good.
const MetaGPU = "Gpu"

// MetaFiles is the user metadata key of a bundle's file names, comma
// separated, where the writer keeps them (the must-gather).
const MetaFiles = "Files"

// MaxLinkExpiry is the longest a presigned link can live (S3's limit for
// SigV4 presigned URLs: seven days).
const MaxLinkExpiry = 7 * 24 * time.Hour
