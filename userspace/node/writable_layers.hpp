#pragma once
// Containers' writable layers, found without the CRI: a process in the
// container cgroup, the overlay mounted as "/" in its mount namespace
// (<proc_root>/<pid>/mountinfo), and that mount's upperdir. Works for every
// runtime that mounts an overlayfs rootfs (containerd, CRI-O, Docker).
// docs/observation.md, "Ephemeral storage".

#include <optional>
#include <string>
#include <string_view>

#include "pressured/observer.hpp"

namespace pressured::node {

/// Undoes the kernel's mountinfo escaping (`\ooo` octal: "\040" for a space,
/// "\054" for a comma, "\134" for a backslash). Pure.
std::string unescape_mount_text(std::string_view s);

/// The unescaped value of `key=` in a super-options field as mountinfo shows
/// it ("rw,lowerdir=...,upperdir=...,workdir=..."). Items are split on raw
/// commas only: the kernel escapes commas inside values. nullopt when absent.
std::optional<std::string> mount_option_value(std::string_view super_options, std::string_view key);

/// The upperdir of the overlay mounted on "/" in a mountinfo text (the
/// topmost "/" mount when several are stacked). nullopt when "/" is not an
/// overlay or has no upperdir (read-only overlay). Pure.
std::optional<std::string> overlay_root_upperdir(std::string_view mountinfo);

/// True when `path` is `root` or below it (both normalised, no "..").
bool path_under(const std::string& path, const std::string& root);

/// A container's writable layer, or why it could not be found.
struct ContainerLayer {
  std::optional<LayerFailure> failure;  // nullopt: `upper_dir` is valid
  std::string upper_dir;                // realpath of the upper dir, below the runtime root
  std::string detail;                   // for the log: the path or error involved
};

/// Finds the writable layer of the container whose cgroup (memory hierarchy,
/// or the unified one on v2) is `container_cgroup`: up to a few pids from its
/// cgroup.procs (or from nested cgroups when it has none itself), the "/"
/// overlay in <proc_root>/<pid>/mountinfo, its upperdir resolved with
/// realpath() and accepted only below `runtime_root_real` (a realpath).
/// Never throws; every failure is a LayerFailure.
ContainerLayer resolve_container_layer(const std::string& container_cgroup, const std::string& proc_root,
                                       const std::string& runtime_root_real);

}  // namespace pressured::node
