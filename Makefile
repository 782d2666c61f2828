# qualifyd build and test entry points. `make test` is what CI runs (.ci/run).
GO       ?= go
GOFLAGS  ?=
PKGS     := ./...
# VERSION is what `qualifyd --version` prints (CHANGELOG.md's latest release,
# plus the commit when the build has VCS information).
VERSION  ?= 0.1.0
LDFLAGS  := -X main.buildVersion=$(VERSION)
# SOURCE_DATE_EPOCH dates the package's files and man page: the last
# commit's time, so one commit builds the same package.
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null)
export SOURCE_DATE_EPOCH
# SHARED is the shared peers' directory, by contrib/shared-dir.sh's rule:
# QUALIFYD_SHARED, else ../shared beside the checkout, else ../shared beside
# the local repository the checkout was cloned from; empty when none holds
# peers/ (SHARED_MISSING then says where it looked). ASTERISK_SRC
# (SHARED/peers/asterisk) holds Asterisk's source and build.sh;
# ASTERISK is where `make deps` builds it, outside the clone, once:
# build.sh does nothing when it holds the build, and a build already there
# is used as it is when no source is at hand. The real-Asterisk tests find
# it through QUALIFYD_ASTERISK, and fail without it.
SHARED       := $(shell QUALIFYD_SHARED='$(QUALIFYD_SHARED)' contrib/shared-dir.sh 2>/dev/null)
SHARED_MISSING = $(shell QUALIFYD_SHARED='$(QUALIFYD_SHARED)' contrib/shared-dir.sh 2>&1 >/dev/null)
ASTERISK_SRC ?= $(if $(SHARED),$(SHARED)/peers/asterisk)
# SRC_WHERE names ASTERISK_SRC in deps' messages, or why there is none.
SRC_WHERE     = $(or $(ASTERISK_SRC),Asterisk source ($(SHARED_MISSING)))
ASTERISK     ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/qualifyd/asterisk
export QUALIFYD_ASTERISK ?= $(ASTERISK)
# ASTERISK_QUALIFY is where `make deps` builds Asterisk's main with upstream
# PR #2041 (asterisk-49fe30d0ff) and contrib/asterisk's res_pjsip qualify
# patches (contrib/asterisk/build.sh, stamped as build.sh: again only when
# the source, the modules or the patches change); the side-by-side tests
# find it through QUALIFYD_ASTERISK_QUALIFY, and fail without it.
ASTERISK_QUALIFY ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/qualifyd/asterisk-qualify
export QUALIFYD_ASTERISK_QUALIFY ?= $(ASTERISK_QUALIFY)
# DEB is the Debian package `make deb` writes.
DEB      := qualifyd_$(VERSION)_amd64.deb

.PHONY: all build test deps vet unit testsuite asterisk-branches smoke lab deb man deb-test lossy blip dropflow figures-calls figures-quiet fuzz fuzz-cover bench bench-engine bench-scale bench-daemon bench-state bench-cluster bench-release bench-cluster-tls screenshot clean

all: build

build:
	$(GO) build -ldflags '$(LDFLAGS)' -o bin/qualifyd ./cmd/qualifyd

# deps installs what the tests need: Go modules and the real SIP peers
# (SIPp from Debian's sip-tester, Kamailio with its http_client module
# (kamailio-utils-modules: the call outcomes' POST), and Asterisk built from source
# into ASTERISK, about 2 minutes the first time, and again with
# contrib/asterisk's patches into ASTERISK_QUALIFY) used by the interop tests,
# iproute2 and nftables for the lossy-network lab, chromium for the
# status page's browser tests, promtool (Debian's prometheus) for the
# metrics' lint and the alerting rules' tests, and PostgreSQL (initdb and
# postgres, on PATH or in /usr/lib/postgresql/*/bin), MariaDB (Debian's
# mariadb-server: mariadb-install-db and mariadbd) and alembic (Debian's,
# which turns Asterisk's migrations in contrib/ast-db-manage, extracted
# into ASTERISK/ast-db-manage from the Asterisk source, into the MariaDB
# schema, and the patched Asterisk's realtime migration) for the realtime
# source's tests; and for Asterisk's own test suite (testsuite), Debian's
# python3 packages it imports, the suite and starpy extracted, and main with
# #2041 built with the test framework twice, unpatched and patched
# (contrib/asterisk/testsuite.sh deps: about 4 minutes each the first time,
# nothing when their stamps match).
deps:
	$(GO) mod download
	$(GO) -C packaging mod download
	@missing=""; \
	command -v sipp >/dev/null 2>&1 || missing="$$missing sip-tester"; \
	command -v kamailio >/dev/null 2>&1 || missing="$$missing kamailio"; \
	ls /usr/lib/*/kamailio/modules/http_client.so >/dev/null 2>&1 || missing="$$missing kamailio-utils-modules"; \
	command -v ip >/dev/null 2>&1 || missing="$$missing iproute2"; \
	command -v nft >/dev/null 2>&1 || missing="$$missing nftables"; \
	command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	command -v promtool >/dev/null 2>&1 || missing="$$missing prometheus"; \
	command -v systemd-analyze >/dev/null 2>&1 || missing="$$missing systemd"; \
	command -v man >/dev/null 2>&1 || missing="$$missing man-db"; \
	{ command -v initdb || ls /usr/lib/postgresql/*/bin/initdb; } >/dev/null 2>&1 || missing="$$missing postgresql"; \
	{ command -v mariadbd || test -x /usr/sbin/mariadbd; } >/dev/null 2>&1 || missing="$$missing mariadb-server"; \
	command -v alembic >/dev/null 2>&1 || missing="$$missing alembic"; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi
	@if [ -x $(ASTERISK_SRC)/build.sh ]; then $(ASTERISK_SRC)/build.sh $(ASTERISK); \
	elif [ -x $(ASTERISK)/sbin/asterisk ]; then echo "deps: no $(SRC_WHERE): using the Asterisk built in $(ASTERISK)"; \
	else echo "deps: no build.sh in $(SRC_WHERE) and no Asterisk in $(ASTERISK): the real-Asterisk tests need one (QUALIFYD_SHARED=... or ASTERISK_SRC=...)"; exit 1; fi
	@if [ -f $(ASTERISK)/ast-db-manage/config/env.py ]; then :; \
	elif [ -f $(ASTERISK_SRC)/asterisk-f0c1c1a7b7.tar.gz ]; then \
		mkdir -p $(ASTERISK)/ast-db-manage && \
		tar -xzf $(ASTERISK_SRC)/asterisk-f0c1c1a7b7.tar.gz --strip-components=3 -C $(ASTERISK)/ast-db-manage asterisk/contrib/ast-db-manage; \
	else echo "deps: no $(SRC_WHERE): the realtime tests need its contrib/ast-db-manage in $(ASTERISK)/ast-db-manage"; exit 1; fi
	@if [ -f $(ASTERISK_SRC)/asterisk-49fe30d0ff.tar.gz ]; then ASTERISK_SRC=$(ASTERISK_SRC) contrib/asterisk/build.sh $(ASTERISK_QUALIFY); \
	elif [ -x $(ASTERISK_QUALIFY)/sbin/asterisk ]; then echo "deps: no $(SRC_WHERE): using the patched Asterisk built in $(ASTERISK_QUALIFY)"; \
	else echo "deps: no $(SRC_WHERE) and no patched Asterisk in $(ASTERISK_QUALIFY): the side-by-side tests need one (QUALIFYD_SHARED=... or ASTERISK_SRC=...)"; exit 1; fi
	ASTERISK_SRC=$(ASTERISK_SRC) contrib/asterisk/testsuite.sh deps

vet:
	$(GO) vet $(PKGS)
	$(GO) -C packaging vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# unit runs every test; the browser tests fail rather than skip without
# chromium. internal/simulate is arithmetic on one goroutine but for its
# worker pool: its tests run without the race detector (14 times faster),
# and the pool's (TestDeterministic, TestRunStopsWithContext) with it.
# Four packages at a time on two cores: the slow ones (the cluster's, the
# daemon's, the binary's end-to-end tests) mostly wait on real peers'
# timers and leave the cores idle (docs/performance.md has the figures).
RACE_PKGS = $(filter-out $(SIMULATE),$(shell $(GO) list $(PKGS)))
SIMULATE  = github.com/qualifyd/qualifyd/internal/simulate
unit:
	QUALIFYD_BROWSER=require $(GO) test -race -count=1 -timeout 20m -p 4 $(RACE_PKGS)
	$(GO) test -count=1 $(SIMULATE)
	$(GO) test -race -count=1 -run '^(TestDeterministic|TestRunStopsWithContext)$$' $(SIMULATE)
	$(GO) -C packaging test -race -count=1 ./...

# testsuite runs Asterisk's own functional test suite
# (../shared/peers/asterisk-testsuite) with contrib/asterisk's companion
# test-suite patch: its existing qualify tests on main with #2041 unpatched
# and patched, side by side (the patched build must pass every test the
# unpatched one passes), and the patch's new tests, which must pass on the
# patched build and fail on the unpatched one (contrib/asterisk/testsuite.sh,
# about 5 minutes with the builds cached). The suite binds
# 127.0.0.1:5060-5062 and the Manager's 5038: it runs after unit (beside
# the labs, in namespaces of their own), and two runs on one machine take
# turns.
testsuite:
	ASTERISK_SRC=$(ASTERISK_SRC) contrib/asterisk/testsuite.sh

# asterisk-branches applies upstream PR #2041 and contrib/asterisk's series
# with git am to Asterisk's 22 and 20 branches from ASTERISK_SRC, builds
# each with --enable-dev-mode and the test framework, and runs the series'
# unit tests in it, with main (49fe30d0ff) built the same way as the
# baseline of the build times (contrib/asterisk/branches.sh, one build at a
# time under nice -n 15 with make -j2: 8 to 12 minutes for the three
# here; nothing for a branch whose stamp matches). Not part of test.
# ASTERISK_BRANCHES_FORCE=1 builds them all again for fresh times;
# contrib/asterisk/branches.sh TARBALL checks any other Asterisk source.
asterisk-branches:
	ASTERISK_SRC=$(ASTERISK_SRC) contrib/asterisk/branches.sh main 22 20

# lab is the short lossy-network run (about a minute, see lossy) beside the
# short blip run (about 2.5 minutes, see blip) and the dropped-flow run
# (about 45 s, qualifyd-lab dropflow), in parallel: it needs root, ip, nft,
# sipp and kamailio, and fails without them.
lab: build
	QUALIFYD_LAB=1 QUALIFYD_BIN=$(CURDIR)/bin/qualifyd $(GO) test -count=1 -timeout 10m -run '^(TestLossyShort|TestBlipShort|TestDropFlowShort)$$' ./cmd/qualifyd-lab/

# smoke is the scale smoke tests, too heavy for the race detector, and
# correctness only: the engine and prober with 100,000 contacts over
# loopback (about 10 s), and the daemon, bin/qualifyd, on a pjsip.conf of
# 100,000 contacts, with a reload (about 15 s).
smoke: build
	QUALIFYD_BIN=$(CURDIR)/bin/qualifyd $(GO) test -count=1 -run '^(TestScaleSmoke|TestDaemonSmoke)$$' ./cmd/qualifyd-bench

# deb builds the Debian package (packaging/, nfpm as a Go library, its own
# module): a static, stripped binary stamped with VERSION, the systemd unit,
# the sample configuration, the man page qualifyd(8) made from the binary's
# help and qualifyd.conf(5) made from docs/configuration.md.
deb:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS) -s -w' -o bin/deb/qualifyd ./cmd/qualifyd
	$(GO) -C packaging run . -bin $(CURDIR)/bin/deb/qualifyd -version $(VERSION) -out $(CURDIR)

# man writes the man pages alone, bin/qualifyd.8 and bin/qualifyd.conf.5
# (`man -l bin/qualifyd.conf.5`).
man: build
	$(GO) -C packaging run . -bin $(CURDIR)/bin/qualifyd -version $(VERSION) -man $(CURDIR)/bin/qualifyd.8 -man5 $(CURDIR)/bin/qualifyd.conf.5

# deb-test installs the package with dpkg (as root), runs what it installed
# and removes and purges it (about 10 s). It refuses to run where qualifyd is
# installed by any other means; two runs on one machine take turns (flock).
deb-test: deb
	flock /tmp/qualifyd-deb-test.lock env QUALIFYD_DEB=$(CURDIR)/$(DEB) $(GO) -C packaging test -count=1 -run '^TestDebInstall$$' .

# test is the README's test command (docs/testing.md): dependencies, vet,
# every test. Asterisk's suite and the labs run side by side: the suite
# binds loopback's ports in its own PID namespace, the labs work in
# network namespaces of their own and mostly wait on their timers.
test: deps vet unit
	$(MAKE) --no-print-directory -j2 --output-sync=target testsuite lab
	$(MAKE) --no-print-directory smoke deb-test

# lossy is the real-network experiment (about 4 minutes, as root):
# qualifyd (N=1 and N=3) and Kamailio's dispatcher probing SIPp through
# nftables loss between two network namespaces; prints the README's table.
lossy: build
	$(GO) build -o bin/qualifyd-lab ./cmd/qualifyd-lab
	bin/qualifyd-lab lossy --qualifyd bin/qualifyd $(LOSSY_FLAGS)

# blip takes qualifyd's own link to its peers down for 15 s, then 60 s, at
# the soak's scale (5,000 AoRs, 500 really dead, F=10 T=2 N=3 R=1), with the
# real Kamailio dispatcher and a webhook receiver as sinks, in network
# namespaces of its own (qdpanic-PID-p and -r), as root (about 4 minutes);
# prints the table of docs/performance.md and fails if an object up before
# a blip was ever pushed down, or a dead one up. BLIP_FLAGS='--failures 1'
# runs it with N=1 (see qualifyd-lab blip -h for the policy's flags).
blip: build
	$(GO) build -o bin/qualifyd-lab ./cmd/qualifyd-lab
	bin/qualifyd-lab blip --qualifyd bin/qualifyd $(BLIP_FLAGS)

# figures-calls measures how much the calls' outcomes shorten detection:
# a trunk carrying a call every 5 s dies, and the real Kamailio (fr_timer
# 2 s) and the real Asterisk (timer_b 32 s, then 6.4 s) each route around
# it with qualifyd hearing the calls and without, side by side
# (docs/performance.md). FIGURE_TRIALS deaths per router (3); about 2
# minutes a trial, the routers in parallel.
FIGURE_TRIALS ?= 3
figures-calls:
	QUALIFYD_FIGURES=1 QUALIFYD_FIGURE_TRIALS=$(FIGURE_TRIALS) QUALIFYD_ASTERISK=$(ASTERISK) \
		$(GO) test -count=1 -timeout 60m -v -run '^TestFigureCallsDetection$$' ./cmd/qualifyd/ | grep -E 'FIGURE|trial [0-9]|^(---|ok|FAIL)'

# figures-quiet measures the quiet trunk (qualify_quiet_only) with the
# real Kamailio and the real Asterisk, and with Asterisk also a burst of
# 20 failed calls and a 503 with Retry-After: 20: two identical healthy
# trunks each carry a call every 5 s, F=30 T=3 N=3 R=2, one with the
# option; prints the OPTIONS each received in FIGURE_WINDOW (10m, for
# Kamailio; Asterisk's window is 10 minutes) and how soon the quiet one is
# probed again after its last call (docs/performance.md). About 11
# minutes a router, one after the other.
FIGURE_WINDOW ?= 10m
figures-quiet:
	QUALIFYD_FIGURES=1 QUALIFYD_FIGURE_WINDOW=$(FIGURE_WINDOW) QUALIFYD_ASTERISK=$(ASTERISK) \
		$(GO) test -count=1 -timeout 60m -v -run '^(TestFigureCallsQuiet|TestFigureCallsAsterisk)$$' ./cmd/qualifyd/ | grep -E 'FIGURE|^(---|ok|FAIL)'

# dropflow probes a TCP peer through a middlebox that silently forgets a
# flow after 2 s without SIP data (nftables, in namespaces qddrop-PID-p
# and -r), with the stream rules before the redial and now side by side,
# as root (about 45 s); prints failures per probe cycle for both
# (docs/performance.md). DROPFLOW_FLAGS change the schedule (see
# qualifyd-lab dropflow -h).
dropflow:
	$(GO) build -o bin/qualifyd-lab ./cmd/qualifyd-lab
	bin/qualifyd-lab dropflow $(DROPFLOW_FLAGS)

# fuzz runs every fuzz target of the repository, found with
# `go test -list '^Fuzz'` in each package, for FUZZTIME each, one after
# the other, and stops at the first failure. The seeds are each
# package's testdata/fuzz/FuzzNAME corpus and its f.Add calls; go test
# writes a crasher there, to be committed as a regression input.
# FUZZMINIMIZETIME bounds the minimization of each new input: go test
# fuzzes nothing while it minimizes, and at its default of 60 s one
# input of FuzzParseReload held both workers idle for the whole minute.
FUZZTIME ?= 10m
FUZZMINIMIZETIME ?= 5s
fuzz:
	@for pkg in $$($(GO) list $(PKGS)); do \
		targets=$$($(GO) test -list '^Fuzz' $$pkg) || { echo "$$targets"; exit 1; }; \
		for target in $$(echo "$$targets" | grep '^Fuzz'); do \
			echo "fuzz: $$pkg $$target for $(FUZZTIME)"; \
			$(GO) test -run '^$$' -fuzz "^$$target\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZETIME) $$pkg || exit 1; \
		done; \
	done

# fuzz-cover prints each fuzz target's package coverage from its seeds
# alone and with the corpus make fuzz grew in go test's cache.
fuzz-cover:
	GO=$(GO) scripts/fuzz-cover.sh

# bench runs the micro and engine benchmarks (figures go in docs/performance.md).
bench:
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

# bench-engine runs the engine for 30 s in real time at 10k, 100k and 1M
# contacts (F = 60 s, an instant fake prober) and prints the scaling table.
bench-engine:
	$(GO) build -o bin/qualifyd-bench ./cmd/qualifyd-bench
	for n in 10000 100000 1000000; do bin/qualifyd-bench engine --contacts $$n --duration 30s; done

# bench-scale measures the engine and UDP prober against a responder process
# at 10k, 100k and 1M contacts (README "Scale"), in the steady state (the
# warm-up outlasts F); the 100k run also measures Kamailio's dispatcher
# probing the same responders in the same window. About 12 minutes.
bench-scale:
	$(GO) build -o bin/qualifyd-bench ./cmd/qualifyd-bench
	bin/qualifyd-bench scale --contacts 10000 --frequency 60s --duration 30s --warmup 65s
	bin/qualifyd-bench scale --contacts 100000 --frequency 10s --duration 30s --compare kamailio
	bin/qualifyd-bench scale --contacts 1000000 --frequency 60s --duration 30s --warmup 65s
	bin/qualifyd-bench scale --contacts 1000000 --frequency 60s --duration 30s --warmup 65s --dead-share 0.1
	bin/qualifyd-bench scale --contacts 1000000 --frequency 60s --duration 30s --warmup 65s --dead-share 1

# bench-state counts the bytes the state keeper writes at a million contacts
# in simulated time, healthy and with 1% of them flipped every minute,
# against the old rule (figures in docs/performance.md).
bench-state:
	$(GO) build -o bin/qualifyd-bench ./cmd/qualifyd-bench
	bin/qualifyd-bench state --contacts 1000000 --span 4h
	bin/qualifyd-bench state --contacts 1000000 --span 1h --flip 0.01

# bench-daemon runs the real daemon, bin/qualifyd, on a generated pjsip.conf
# of a million contacts, all answering and all dead, against the bench's
# responder, and measures it from outside: start, memory, CPU, lateness
# (from /metrics) and a reload through the API. About 5 minutes.
bench-daemon: build
	$(GO) build -o bin/qualifyd-bench ./cmd/qualifyd-bench
	bin/qualifyd-bench daemon --qualifyd bin/qualifyd --contacts 1000000 --frequency 60s --duration 30s
	bin/qualifyd-bench daemon --qualifyd bin/qualifyd --contacts 1000000 --frequency 60s --duration 30s --dead-share 1

# bench-cluster runs bin/qualifyd as a single node, as 3 clustered nodes
# (vantages=2) on 100,000 contacts and as a single node again, the single
# node on as many contacts as a node of the cluster probes: the cost of a
# node against the single one at the same probe rate, once the cluster's
# stores are quiet and the embedded server has dropped what the first
# round left in memory (--settle 180s), the verdict latency of a flip of a
# tenth of the contacts, and a kill -9 of the leader (docs/performance.md).
BENCH_CLUSTER = --contacts 100000 --vantages 2 --frequency 10s --duration 30s --settle 180s

bench-cluster: build
	$(GO) build -o bin/qualifyd-bench ./cmd/qualifyd-bench
	bin/qualifyd-bench cluster --qualifyd bin/qualifyd $(BENCH_CLUSTER)

# bench-cluster-tls runs bench-cluster's cluster twice with its routes in
# clear and twice with mutual TLS and the secret, alternated, between the
# two single runs, and prints the ratio of TLS on to off
# (docs/performance.md); BENCH_CLUSTER='...' runs a smaller one.
bench-cluster-tls: build
	$(GO) build -o bin/qualifyd-bench ./cmd/qualifyd-bench
	bin/qualifyd-bench cluster --qualifyd bin/qualifyd $(BENCH_CLUSTER) --tls alternate --rounds 2

# bench-release times releases of 10,000 objects one at a time (as before
# batches) and batched, alternately, through a webhook receiver (instant and
# 1 ms late), the real Kamailio (needs kamailio) and the fake Manager, and
# prints both times and their ratio (docs/performance.md).
bench-release:
	$(GO) test -run '^$$' -bench '^BenchmarkRelease$$' -benchtime 3x ./internal/sink/

# screenshot refreshes docs/status-page.png, the README's picture of the
# status page, from the browser test that renders it (needs chromium).
screenshot:
	QUALIFYD_BROWSER=require QUALIFYD_SCREENSHOT=$(CURDIR)/docs/status-page.png $(GO) test -count=1 -run '^TestBrowserScreenshot$$' ./internal/web

clean:
	rm -rf bin $(DEB)
