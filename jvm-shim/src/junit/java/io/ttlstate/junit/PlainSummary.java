package io.ttlstate.junit;

import java.util.concurrent.atomic.AtomicLong;

import org.junit.platform.engine.TestExecutionResult;
import org.junit.platform.launcher.TestExecutionListener;
import org.junit.platform.launcher.TestIdentifier;
import org.junit.platform.launcher.TestPlan;

/**
 * Prints {@code java: N passed, M failed} (and {@code , K skipped}) as the run's last line,
 * after the console launcher's own summary: from a shutdown hook, as the launcher exits right
 * after printing it. A failed container (a test class, or a parameter source that threw)
 * counts as a failure. Registered through META-INF/services.
 */
public final class PlainSummary implements TestExecutionListener {
    private final AtomicLong passed = new AtomicLong();
    private final AtomicLong failed = new AtomicLong();
    private final AtomicLong skipped = new AtomicLong();

    @Override
    public void executionSkipped(TestIdentifier id, String reason) {
        if (id.isTest()) {
            skipped.incrementAndGet();
        }
    }

    @Override
    public void executionFinished(TestIdentifier id, TestExecutionResult result) {
        switch (result.getStatus()) {
            case SUCCESSFUL:
                if (id.isTest()) {
                    passed.incrementAndGet();
                }
                break;
            case ABORTED:
                if (id.isTest()) {
                    skipped.incrementAndGet();
                }
                break;
            default:
                failed.incrementAndGet();
        }
    }

    @Override
    public void testPlanExecutionFinished(TestPlan plan) {
        String line = "java: " + passed + " passed, " + failed + " failed"
                + (skipped.get() > 0 ? ", " + skipped + " skipped" : "");
        Runtime.getRuntime().addShutdownHook(new Thread(() -> System.out.println(line)));
    }
}
