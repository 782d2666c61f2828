package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/goreleaser/nfpm/v2"
	_ "github.com/goreleaser/nfpm/v2/deb" // registers the "deb" packager
)

// configFile describes the package; its ${VERSION}, ${BIN}, ${MAN},
// ${MAN5} and ${CHANGELOG} are filled by writeDeb.
const configFile = "nfpm.yaml"

// changelogFile is the project's changelog, the source of the package's.
const changelogFile = "../CHANGELOG.md"

// writeDeb writes o.out/qualifyd_VERSION_amd64.deb: configFile's contents
// with the binary o.bin, page and page5 gzipped as the man pages qualifyd(8)
// and qualifyd.conf(5), and the changelog of o.version dated date. The package appears whole or not at all (written
// aside, then renamed).
func writeDeb(o options, page, page5 []byte, date time.Time) (string, error) {
	tmp, err := os.MkdirTemp("", "qualifyd-deb-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	bin, err := filepath.Abs(o.bin)
	if err != nil {
		return "", err
	}
	env := map[string]string{
		"VERSION": o.version, "BIN": bin,
		"MAN": filepath.Join(tmp, "qualifyd.8.gz"), "MAN5": filepath.Join(tmp, "qualifyd.conf.5.gz"),
		"CHANGELOG": filepath.Join(tmp, "changelog.gz"),
	}
	info, err := debInfo(func(k string) string { return env[k] })
	if err != nil {
		return "", err
	}
	if err := writeGzip(env["MAN"], page); err != nil {
		return "", err
	}
	if err := writeGzip(env["MAN5"], page5); err != nil {
		return "", err
	}
	if err := writeChangelog(env["CHANGELOG"], o.version, info.Maintainer, date); err != nil {
		return "", err
	}
	if err := nfpm.PrepareForPackager(info, "deb"); err != nil {
		return "", fmt.Errorf("%s: %w", configFile, err)
	}
	return packageTo(info, o.out)
}

// debInfo reads configFile, with env filling its variables, as the deb
// packager sees it.
func debInfo(env func(string) string) (*nfpm.Info, error) {
	cfg, err := nfpm.ParseFileWithEnvMapping(configFile, env)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", configFile, err)
	}
	info, err := cfg.Get("deb")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", configFile, err)
	}
	return info, nil
}

// writeChangelog writes version's entry of changelogFile to path as a
// gzipped Debian changelog.
func writeChangelog(path, version, maintainer string, date time.Time) error {
	md, err := os.ReadFile(changelogFile)
	if err != nil {
		return err
	}
	cl, err := debianChangelog(md, version, maintainer, date)
	if err != nil {
		return fmt.Errorf("%s: %w", changelogFile, err)
	}
	return writeGzip(path, cl)
}

// packageTo writes info's package into dir under Debian's file name.
func packageTo(info *nfpm.Info, dir string) (string, error) {
	deb, err := nfpm.Get("deb")
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, deb.ConventionalFileName(info))
	f, err := os.CreateTemp(dir, ".qualifyd-deb-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(f.Name())
	if err := deb.Package(info, f); err != nil {
		f.Close()
		return "", fmt.Errorf("%s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	if err := os.Chmod(f.Name(), 0o644); err != nil {
		return "", err
	}
	return path, os.Rename(f.Name(), path)
}

// writeGzip writes page to path, compressed as gzipPage does.
func writeGzip(path string, page []byte) error {
	gz, err := gzipPage(page)
	if err != nil {
		return err
	}
	return os.WriteFile(path, gz, 0o644)
}
