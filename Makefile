# SPDX-License-Identifier: MIT
# Front door for the README's two commands (both install dependencies with
# apt-get, through sudo when not root):
#   make demo     build and run `zl-bench compare`
#   make check    build and run every test: plain, ASan+UBSan, TSan, VM
# Other targets: build install uninstall package clean fuzz deps help.
# The real build is CMake; this file only names the build directories and
# the order of things.

BUILD_TYPE   ?= RelWithDebInfo
PREFIX       ?= /usr/local
JOBS         ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE        ?= cmake
CTEST        ?= ctest
CMAKE_FLAGS  ?=
FUZZ_SECONDS ?= 60
# Print the output of failing tests; 300 s default cap per test (a test's
# own TIMEOUT property wins); two tests at a time (tests that must run alone
# set RUN_SERIAL).
CTEST_FLAGS  ?= --output-on-failure --timeout 300 -j2
# Build directories.
B       ?= build
B_ASAN  ?= build-asan
B_TSAN  ?= build-tsan
B_FUZZ  ?= build-fuzz

# Sanitizer reports with stacks; exit non-zero on the first report.
export UBSAN_OPTIONS ?= print_stacktrace=1:halt_on_error=1
export ASAN_OPTIONS  ?= detect_leaks=1:abort_on_error=0
export TSAN_OPTIONS  ?= halt_on_error=1:second_deadlock_stack=1

# The sanitizer runtimes of gcc 12 (TSan, and ASan in some versions) cannot
# place their shadow memory when the kernel randomises mmap with more than
# 28 bits (newer kernels' default); the sanitizer runs go without ASLR where
# personality(2) allows it (not in some containers).
NOASLR := $(shell setarch $$(uname -m) -R true >/dev/null 2>&1 && echo setarch $$(uname -m) -R)

configure = $(CMAKE) -S . -B $(1) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) \
	-DCMAKE_INSTALL_PREFIX=$(PREFIX) $(CMAKE_FLAGS)

.NOTPARALLEL:
.PHONY: all help deps build demo check test test-asan test-tsan test-vm \
	install uninstall package clean fuzz

all: build

help:
	@echo "make demo      deps + build + $(B)/tools/zl-bench compare"
	@echo "make check     deps + all tests ($(B), $(B_ASAN), $(B_TSAN), VM)"
	@echo "make build     configure and build in $(B) ($(BUILD_TYPE))"
	@echo "make install   install $(B) to PREFIX=$(PREFIX) (DESTDIR honoured)"
	@echo "make uninstall remove what make install installed (DESTDIR honoured)"
	@echo "make package   a Debian package of the installed tree in $(B) (CPack)"
	@echo "make fuzz      clang libFuzzer build in $(B_FUZZ), $(FUZZ_SECONDS) s per target"
	@echo "make clean     remove the build directories"

deps:
	scripts/install-deps.sh

build:
	$(call configure,$(B))
	$(CMAKE) --build $(B) -j$(JOBS)

# Run from $(B) so that zl-bench-compare.csv and .png land there.
demo: deps build
	cd $(B) && tools/zl-bench compare

check: deps test test-asan test-tsan test-vm
	@echo "make check: all test runs passed"

# Everything except the VM tests, optimised build.
test: build
	cd $(B) && $(CTEST) $(CTEST_FLAGS) -LE '^vm$$'

# Everything except the VM tests under ASan+UBSan.
test-asan:
	$(call configure,$(B_ASAN)) -DZL_SANITIZE=address,undefined
	$(CMAKE) --build $(B_ASAN) -j$(JOBS)
	cd $(B_ASAN) && $(NOASLR) $(CTEST) $(CTEST_FLAGS) -LE '^vm$$'

# The tests labelled `threads` under TSan.
test-tsan:
	$(call configure,$(B_TSAN)) -DZL_SANITIZE=thread
	$(CMAKE) --build $(B_TSAN) -j$(JOBS)
	cd $(B_TSAN) && $(NOASLR) $(CTEST) $(CTEST_FLAGS) -L '^threads$$'

# The RDMA tests in a qemu VM (label `vm`), one at a time; they exit 77
# (skipped) where the VM cannot run.
test-vm: build
	@cd $(B) && if $(CTEST) -N -L '^vm$$' | grep -q 'Total Tests: [1-9]'; then \
		echo "$(CTEST) --output-on-failure --timeout 300 -L '^vm\$$'"; \
		$(CTEST) --output-on-failure --timeout 300 -L '^vm$$'; \
	else \
		echo "test-vm: no tests labelled vm"; \
	fi

install: build
	DESTDIR="$(DESTDIR)" $(CMAKE) --install $(B)

# What `make install` installed (its manifest), with the same DESTDIR.
uninstall:
	@test -f $(B)/install_manifest.txt || { echo "uninstall: no $(B)/install_manifest.txt (nothing installed from $(B))"; exit 1; }
	@while read -r f || [ -n "$$f" ]; do rm -fv "$(DESTDIR)$$f"; done < $(B)/install_manifest.txt

# A Debian package of the installed tree: $(B)/zipline_VERSION_ARCH.deb.
package: build
	cd $(B) && cpack -G DEB

# libFuzzer: each fuzz_* executable runs for FUZZ_SECONDS on its corpus.
fuzz:
	$(CMAKE) -S . -B $(B_FUZZ) -DCMAKE_BUILD_TYPE=RelWithDebInfo \
		-DCMAKE_C_COMPILER=clang -DZL_FUZZ=ON -DZL_SANITIZE=address,undefined \
		$(CMAKE_FLAGS)
	$(CMAKE) --build $(B_FUZZ) -j$(JOBS)
	@set -e; n=0; \
	for f in $$(find $(B_FUZZ) -type f -perm -u+x -name 'fuzz_*' | sort); do \
		name=$$(basename "$$f"); corpus=$(B_FUZZ)/corpus/$$name; \
		mkdir -p "$$corpus"; seeds=; \
		if [ -d "tests/fuzz/corpus/$$name" ]; then seeds=tests/fuzz/corpus/$$name; fi; \
		echo "fuzz: $$name for $(FUZZ_SECONDS) s"; \
		"$$f" -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
			-artifact_prefix=$(B_FUZZ)/ "$$corpus" $$seeds; \
		n=$$((n + 1)); \
	done; \
	if [ $$n -eq 0 ]; then echo "fuzz: no fuzz_* targets built" >&2; exit 1; fi

clean:
	rm -rf $(B) $(B_ASAN) $(B_TSAN) $(B_FUZZ) build-docs
