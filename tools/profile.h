/* tools/profile.h — the `tfvm profile` command (tools/profile.c). */
#ifndef TFVM_TOOLS_PROFILE_H
#define TFVM_TOOLS_PROFILE_H

extern const char *const cli_usage_profile;
int cli_profile(int argc, char **argv);

#endif
