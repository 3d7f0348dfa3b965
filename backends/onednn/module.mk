# The onednn backend: oneDNN (Debian's libdnnl-dev, the C API of dnnl.h)
# built as the module $(BUILD)/modules/onednn.so, so that the library is
# mapped only when the onednn backend is probed or run. ONEDNN=0 leaves it
# out. oneDNN brings its own OpenMP runtime (libgomp), which the engine's
# update loop shares.
# what the registry knows of the backend, built or not
LIB_SRCS += backends/onednn/registration.c
ONEDNN ?= 1
ifneq ($(ONEDNN),0)
ONEDNN_PROBE_CODE := $(H)include <dnnl.h>\n$(H)include <omp.h>\nint main(void){return dnnl_version()->major + omp_get_max_threads() < 0;}\n
ifeq ($(call probe,$(ONEDNN_PROBE_CODE),-fopenmp -Werror=implicit-function-declaration -ldnnl),1)
HAVE_ONEDNN := 1
endif
endif

ifeq ($(HAVE_ONEDNN),1)
CFLAGS += -DHAVE_ONEDNN
ONEDNN_OBJS := $(foreach f,onednn onednn_memory onednn_chains,$(BUILD)/backends/onednn/$(f).o)
ONEDNN_LIBS := -ldnnl -fopenmp
$(eval $(call module_rule,onednn,$(ONEDNN_OBJS) $(MODULE_SHARED_OBJS),$(ONEDNN_LIBS)))
$(BUILD)/backends/onednn/%.o: CFLAGS += -fopenmp
TESTS += test_onednn
TEST_OBJS_test_onednn := $(ONEDNN_OBJS)
TEST_LIBS_test_onednn := $(ONEDNN_LIBS)
else ifeq ($(ONEDNN),0)
SKIPPED += onednn_backend:_left_out_with_make_ONEDNN=0
else
SKIPPED += onednn_backend:_dnnl.h_or_libdnnl_not_found,_apt-get_install_libdnnl-dev
endif
