# xign: build, test, demo and benchmarks. `make test` and `make demo` work on a fresh Debian 12 with Swift.
SWIFT ?= swift
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# Build and test dependencies from Debian: the system libraries and the real tools the tests drive.
DEBIAN_PACKAGES := libcurl4-openssl-dev libssl-dev libqrencode-dev libpam0g-dev libtss2-dev \
	zbar-tools sqlite3 ca-certificates

.PHONY: all deps build test demo bench clean

all: build

deps:
	@missing=$$(for p in $(DEBIAN_PACKAGES); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q "install ok installed" || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "Installing from Debian:" $$missing; \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	fi

build: deps
	$(SWIFT) build

test: deps
	$(SWIFT) build --build-tests
	$(SWIFT) test

demo: build
	bash .ci/demo.sh "$$($(SWIFT) build --show-bin-path)"

bench: deps
	$(SWIFT) build -c release
	"$$($(SWIFT) build -c release --show-bin-path)/xign-bench"

clean:
	rm -rf .build
