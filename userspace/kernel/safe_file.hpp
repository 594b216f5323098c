#pragma once
// Files pressured keeps on the node's disk (the checkpoint, the seccomp
// profile install-seccomp puts in the kubelet's directory), written and read
// back so that nothing planted in those directories can redirect or stall
// them: every name is resolved relative to an open directory fd, a symbolic
// link is never followed below the configured base, the temporary file is
// created new (O_EXCL), its mode set on the fd, and a read opens without
// blocking and takes only a regular file. `pressured uninstall` removes what
// these functions wrote by the same rules (daemon/uninstall.hpp).

#include <cstddef>
#include <string>
#include <string_view>

#include "kernel/fd.hpp"
#include "pressured/result.hpp"

namespace pressured::kernel {

/// The file the writer puts in every directory it makes, so that `pressured
/// uninstall` removes a directory only when pressured made it (the kubelet's
/// seccomp directory, or a state directory an operator or the kubelet made,
/// stays).
inline constexpr std::string_view kMadeByPressuredName = ".made-by-pressured";
/// Its exact contents (anything else there is not pressured's marker).
inline constexpr std::string_view kMadeByPressuredText =
    "pressured made this directory; `pressured uninstall` removes it once nothing else is in it\n";

struct ReplaceOptions {
  unsigned mode = 0600;      ///< the file's mode, set with fchmod (the umask does not apply)
  unsigned dir_mode = 0700;  ///< directories made on the way (each gets the marker)
};

/// Opens the directory `path` without following a symbolic link in any of its
/// components (each opened relative to the one before with O_NOFOLLOW): the
/// error names the component that is a link (ELOOP) or not a directory.
Result<Fd> open_dir_nofollow(const std::string& path);

/// Replaces `base`/`relative` with `contents` atomically: the directories of
/// `relative` are opened without following links (missing ones are made,
/// with the marker), the temporary `<name>.tmp` is created with
/// O_EXCL|O_NOFOLLOW (a stale one, or anything planted under that name, is
/// unlinked first, never written through), written, fchmod'ed, fsync'ed and
/// renamed over `<name>` with renameat, and the directory is fsync'ed. `base`
/// is the operator's path and is followed as given. Something at `<name>`
/// that is not a regular file (a link, a FIFO, a directory) is refused, not
/// replaced.
Result<void> replace_file(const std::string& base, std::string_view relative, std::string_view contents,
                          const ReplaceOptions& options = {});

/// Reads `name` in the open directory `dirfd` (`dir_path` for messages):
/// opened with O_NOFOLLOW|O_NONBLOCK, refused unless a regular file, EFBIG
/// when larger than `max_bytes`. A missing file is ENOENT.
Result<std::string> read_regular_file_at(int dirfd, const std::string& dir_path, const std::string& name,
                                         std::size_t max_bytes);

/// read_regular_file_at for `path` (read_regular_file in file.hpp follows a
/// link at the last component; this one refuses it): its directory is followed as given (the
/// operator's), its last component is not.
Result<std::string> read_regular_file_nofollow(const std::string& path, std::size_t max_bytes);

}  // namespace pressured::kernel
