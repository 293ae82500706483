/// Tests import XignTestSupport alone; the processes it builds on come with it.
@_exported import XignHarness
