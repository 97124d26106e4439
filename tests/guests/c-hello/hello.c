/* A WASI preview1 command for tests/real_guests.rs: prints one known line.
 * ci/build-guests.sh compiles it to a core module; the test wraps that in
 * a wasi:cli/command component with the preview1 command adapter. */
#include <stdio.h>

int main(void) {
    printf("hello from a c component\n");
    return 0;
}
