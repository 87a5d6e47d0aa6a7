package localcluster

// ThirdPartyCRDsDir is the directory in BinDir holding the third-party CRD
// manifests that Options.ThirdPartyCRDs installs; hack/testbin.sh links it
// to a cache directory keyed by the versions of Cluster API, Metal3's apis
// module and controller-gen.
const ThirdPartyCRDsDir = "thirdparty-crds"

// Flag is one command-line flag of a control plane binary, --Name=Value.
type Flag struct{ Name, Value string }

// DRAFlags are the kube-apiserver flags of Options.DRA. In Kubernetes 1.36
// DeviceTaintRule is served as resource.k8s.io/v1beta2 (and v1alpha3),
// both off by default: the v1beta2 group version is one of the beta APIs
// disabled unless --runtime-config enables it, and its devicetaintrules
// resource also needs the DRADeviceTaintRules gate (beta, off by default)
// on top of DRADeviceTaints (beta, on by default, named anyway so that the
// flags do not depend on that default).
var DRAFlags = []Flag{
	{Name: "feature-gates", Value: "DRADeviceTaints=true,DRADeviceTaintRules=true"},
	{Name: "runtime-config", Value: "resource.k8s.io/v1beta2=true"},
}

// draDeviceTaintRules is the group, version and resource that Options.DRA
// serves, as in a URL path below /apis.
const draDeviceTaintRules = "resource.k8s.io/v1beta2/devicetaintrules"
