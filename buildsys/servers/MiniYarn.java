import java.io.BufferedReader;
import java.io.File;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.yarn.conf.YarnConfiguration;
import org.apache.hadoop.yarn.server.MiniYARNCluster;

/**
 * A MiniYARNCluster for the tests (pytest -m yarn; tests/yarn_cluster.py runs it): a
 * ResourceManager and N NodeManagers in one process of its own (its working directory holds
 * their logs and local directories), with {@code fs.defaultFS} the given HDFS. Once every
 * NodeManager has registered it writes the client configuration ({@code core-site.xml},
 * {@code yarn-site.xml}) into CONF_DIR, for {@code HADOOP_CONF_DIR} of {@code spark-submit},
 * and prints {@code READY <ResourceManager address>}. End of input stops it.
 *
 * <p>Usage: {@code java MiniYarn CONF_DIR HDFS_URI NODEMANAGERS}.
 */
public final class MiniYarn {
    public static void main(String[] args) throws Exception {
        File confDir = new File(args[0]);
        String hdfs = args[1];
        int nodeManagers = Integer.parseInt(args[2]);
        YarnConfiguration conf = new YarnConfiguration();
        conf.set("fs.defaultFS", hdfs);
        conf.setInt(YarnConfiguration.NM_PMEM_MB, 8192);
        conf.setInt(YarnConfiguration.NM_VCORES, 4);
        conf.setBoolean(YarnConfiguration.NM_PMEM_CHECK_ENABLED, false);
        conf.setBoolean(YarnConfiguration.NM_VMEM_CHECK_ENABLED, false);
        conf.setInt(YarnConfiguration.RM_SCHEDULER_MINIMUM_ALLOCATION_MB, 256);
        conf.setFloat(YarnConfiguration.NM_MAX_PER_DISK_UTILIZATION_PERCENTAGE, 99.9f);
        conf.set(YarnConfiguration.RM_SCHEDULER, "org.apache.hadoop.yarn.server.resourcemanager.scheduler.fifo.FifoScheduler");
        MiniYARNCluster cluster = new MiniYARNCluster("ttlstate-yarn", nodeManagers, 1, 1);
        cluster.init(conf);
        cluster.start();
        Runtime.getRuntime().addShutdownHook(new Thread(cluster::stop));
        if (!cluster.waitForNodeManagersToConnect(60_000)) {
            throw new IllegalStateException("the NodeManagers did not register in 60 s");
        }
        Configuration client = new Configuration(cluster.getConfig());
        confDir.mkdirs();
        try (OutputStream out = new FileOutputStream(new File(confDir, "yarn-site.xml"))) {
            client.writeXml(out);
        }
        Configuration core = new Configuration(false);
        core.set("fs.defaultFS", hdfs);
        try (OutputStream out = new FileOutputStream(new File(confDir, "core-site.xml"))) {
            core.writeXml(out);
        }
        System.out.println("READY " + client.get(YarnConfiguration.RM_ADDRESS));
        System.out.flush();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        while (in.readLine() != null) {
            System.out.println("ERROR no commands");
            System.out.flush();
        }
        cluster.stop();
    }
}
