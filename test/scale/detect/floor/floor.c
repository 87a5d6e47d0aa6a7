/*
 * floor: the least a GPU check can cost. It loads NVML, initializes it,
 * counts the GPUs, shuts NVML down and prints the count; nothing else.
 * hack/device-measure-gpu.sh measures kubemedic-detect's GPU checks
 * against it, in the same run on the same GPU (issue 19, "Measure").
 *
 *   cc -O2 -o floor floor.c -ldl
 *
 * No NVIDIA header is needed: the three functions are declared here with
 * the signatures of NVML's nvml.h (NVML API version 13, as vendored in
 * github.com/NVIDIA/go-nvml v0.13.3-0, pkg/nvml/nvml.h):
 *
 *   nvmlReturn_t DECLDIR nvmlInit_v2(void);
 *   nvmlReturn_t DECLDIR nvmlDeviceGetCount_v2(unsigned int *deviceCount);
 *   nvmlReturn_t DECLDIR nvmlShutdown(void);
 *
 * nvmlReturn_t is an enum (an int on every ABI NVML ships for), and
 * NVML_SUCCESS is 0. DECLDIR is empty on Linux.
 *
 * The library is opened the way go-nvml opens it (RTLD_LAZY|RTLD_GLOBAL),
 * so the two differ only in what runs around NVML. Exit 0 with the count
 * on stdout; 1 when the library is missing or a call fails.
 */
#include <dlfcn.h>
#include <stdio.h>

typedef int nvmlReturn_t; /* enum nvmlReturn_enum; NVML_SUCCESS = 0 */

int main(void) {
	void *lib = dlopen("libnvidia-ml.so.1", RTLD_LAZY | RTLD_GLOBAL);
	if (lib == NULL) {
		fprintf(stderr, "floor: dlopen libnvidia-ml.so.1: %s\n", dlerror());
		return 1;
	}
	nvmlReturn_t (*init)(void) = (nvmlReturn_t (*)(void))dlsym(lib, "nvmlInit_v2");
	nvmlReturn_t (*count)(unsigned int *) = (nvmlReturn_t (*)(unsigned int *))dlsym(lib, "nvmlDeviceGetCount_v2");
	nvmlReturn_t (*shutdown)(void) = (nvmlReturn_t (*)(void))dlsym(lib, "nvmlShutdown");
	if (init == NULL || count == NULL || shutdown == NULL) {
		fprintf(stderr, "floor: libnvidia-ml.so.1 lacks nvmlInit_v2, nvmlDeviceGetCount_v2 or nvmlShutdown\n");
		return 1;
	}
	nvmlReturn_t r = init();
	if (r != 0) {
		fprintf(stderr, "floor: nvmlInit_v2: %d\n", r);
		return 1;
	}
	unsigned int n = 0;
	r = count(&n);
	if (r != 0) {
		fprintf(stderr, "floor: nvmlDeviceGetCount_v2: %d\n", r);
		shutdown();
		return 1;
	}
	printf("%u\n", n);
	r = shutdown();
	if (r != 0) {
		fprintf(stderr, "floor: nvmlShutdown: %d\n", r);
		return 1;
	}
	return 0;
}
