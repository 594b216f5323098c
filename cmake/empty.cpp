// Keeps every concern's library non-empty while its folder is being filled.
