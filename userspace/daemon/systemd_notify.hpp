#pragma once
// systemd's service notification protocol (sd_notify(3)): READY=1,
// STOPPING=1, STATUS=..., WATCHDOG=1 as one datagram each to the AF_UNIX
// socket named by $NOTIFY_SOCKET, and the watchdog interval from
// $WATCHDOG_USEC / $WATCHDOG_PID. Spoken here rather than through
// libsystemd: the protocol is a documented stable interface that systemd
// invites services to implement themselves, and libsystemd brought six more
// libraries (libgcrypt, liblzma, libzstd, liblz4, libcap, libgpg-error) into
// every start of the daemon for these two calls.

#include <string_view>

#include "pressured/clock.hpp"

namespace pressured::systemd {

/// Sends `state` (newline-separated assignments) to $NOTIFY_SOCKET. False
/// when the daemon does not run under a notifying service manager (no
/// variable), the address is not an AF_UNIX path ("/...") or abstract name
/// ("@..."), or the datagram was not sent.
bool notify(std::string_view state);

/// The service's watchdog interval (WatchdogSec): $WATCHDOG_USEC when it is a
/// positive number of microseconds and $WATCHDOG_PID is unset or this
/// process's pid; zero otherwise.
Duration watchdog_interval();

}  // namespace pressured::systemd
