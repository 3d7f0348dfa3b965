# Framework peers: compiled into ./bench (they link nothing heavy; the
# framework runs in a child process). The script is found in the source
# tree when it is not beside the program.
LIB_SRCS += $(wildcard backends/peer/*.c)
$(BUILD)/backends/peer/probe.o: CFLAGS += -DLB_SOURCE_DIR_ABS='"$(abspath .)"'
# The peer against naive (skipped without torch); its faults end to end.
TESTS += test_peer
TEST_SCRIPTS += tests/test_peers.sh tests/test_peer_process.sh
